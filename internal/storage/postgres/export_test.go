package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/memstore/memstore/internal/storage/sqlstore"
)

// WriteMemoryWith runs fn as one write to the store in its batches, as
// the store's own memory writes run.
func (s *DB) WriteMemoryWith(ctx context.Context, storeID string, fn func(context.Context, sqlstore.Conn, sqlstore.StoreCounters) error) error {
	return s.writeMemory(ctx, storeID, fn)
}

// LateralReads is the statement a batch sends for the reads ahead of query
// with each of args (DB.lateral), and its arguments: one array per
// position.
func (s *DB) LateralReads(query string, args [][]any) (string, []any) {
	g := make([]*aheadRead, len(args))
	for i, a := range args {
		g[i] = &aheadRead{query: query, args: a}
	}
	return s.lateral(g)
}

// Numbered is query as the backend sends it ($1, $2, … for "?").
func (s *DB) Numbered(query string) string { return s.numbered(query) }

// SessionShard is the shard of session sessionID's appends while many
// appends wait (while few do, they all share the first).
func (s *DB) SessionShard(sessionID string) int {
	return shardOf(sessionID, len(s.sessionCommits.shards))
}

// SessionBatchesAlone counts the append batches that fell back to running
// their appends alone.
func (s *DB) SessionBatchesAlone() int64 { return s.sessionCommits.alone.Load() }

// MemoryShard is the shard of the store's writes while many wait.
func (s *DB) MemoryShard(storeID string) int { return shardOf(storeID, len(s.commits.shards)) }

// MemoryShardsUsed counts the memory-write shards that ran a batch.
func (s *DB) MemoryShardsUsed() int {
	n := 0
	for i := range s.commits.shards {
		sh := &s.commits.shards[i]
		sh.mu.Lock()
		if sh.lastTook > 0 {
			n++
		}
		sh.mu.Unlock()
	}
	return n
}

// GuessedBatches counts the memory write batches committed on guesses
// (guess.go), and WrongGuesses those whose guess the database found wrong.
func (s *DB) GuessedBatches() int64 { return s.guesses.batches.Load() }
func (s *DB) WrongGuesses() int64   { return s.guesses.wrong.Load() }

// MergedStatements counts the merged row statements the DB sent.
func (s *DB) MergedStatements() int64 { return s.merges.Load() }

// GuessAgain lets batches guess again at once after a wrong guess.
func (s *DB) GuessAgain() {
	s.guesses.mu.Lock()
	defer s.guesses.mu.Unlock()
	s.guesses.off = nil
}

// GuessedAppendBatches counts the append batches committed on guesses;
// WrongAppendGuesses, those whose guess was wrong.
func (s *DB) GuessedAppendBatches() int64 { return s.sessionGuesses.batches.Load() }
func (s *DB) WrongAppendGuesses() int64   { return s.sessionGuesses.wrong.Load() }

// KeepClockFor lets guessed batches stamp by a clock read up to d ago, so
// a slow test run does not make batches read first for the clock.
func (s *DB) KeepClockFor(d time.Duration) {
	s.guesses.mu.Lock()
	defer s.guesses.mu.Unlock()
	s.guesses.fresh = d
}

// GuessCheck is the statement a guessed batch checks its reads of query
// with, each read's arguments one of reads, and its arguments.
func (s *DB) GuessCheck(query string, reads [][]any) (string, []any) {
	g := make([]*aheadRead, len(reads))
	for i, a := range reads {
		g[i] = &aheadRead{query: query, args: a}
	}
	return s.checkStatement(g)
}

// PlannedStatement is a statement a batch runs on generic plans
// (genericPlans) on the rows of Table, with arguments for some.
type PlannedStatement struct {
	Name, Table, Query string
	Args               []any
}

// PlannedStatements are the statements a batch of memory writes locks its
// stores with, checks their guessed counters with and writes their
// counters with, and the one a batch of appends locks its sessions with,
// each with arguments for ids.
func PlannedStatements(ids []string) []PlannedStatement {
	n := len(ids)
	return []PlannedStatement{
		{"lock", "memory_stores", lockStores, []any{ids}},
		{"check", "memory_stores", checkGuessedStores, []any{ids, make([]int64, n), make([]int64, n), make([]bool, n)}},
		{"counters", "memory_stores", updateCounters, []any{ids, make([]int64, n), make([]int64, n)}},
		{"sessions", "sessions", lockSessions, []any{ids}},
	}
}

// GenericPlans is the statement that sets a batch's plans' settings, in
// its transaction.
const GenericPlans = genericPlans

// SearchEntryValue is the search entry the server writes for a memory, in
// tsvector's binary form, as a write hands it to pgx on a connection whose
// types RegisterTypes set.
func SearchEntryValue(path, content string) any { return searchEntry(path, content) }

// RegisterTypes sets m's types as the server's connections have them.
func RegisterTypes(m *pgtype.Map) { registerTypes(m) }

// SearchEntryText is SearchEntryValue in tsvector's text form ('word':1A,2 …),
// its lexemes in the order the binary form holds them, read back by the
// layout tsvectorrecv reads.
func SearchEntryText(path, content string) string {
	b := []byte(searchEntry(path, content))
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	words := make([]string, 0, n)
	for range n {
		end := bytes.IndexByte(b, 0)
		word := string(b[:end])
		b = b[end+1:]
		npos := int(binary.BigEndian.Uint16(b))
		b = b[2:]
		positions := make([]string, npos)
		for j := range npos {
			p := binary.BigEndian.Uint16(b[2*j:])
			positions[j] = strconv.Itoa(int(p & 0x3fff))
			switch p >> 14 {
			case 3:
				positions[j] += "A"
			case 2:
				positions[j] += "B"
			case 1:
				positions[j] += "C"
			}
		}
		b = b[2*npos:]
		words = append(words, "'"+word+"':"+strings.Join(positions, ","))
	}
	if len(b) != 0 {
		panic(fmt.Sprintf("search entry: %d bytes after its %d lexemes", len(b), n))
	}
	return strings.Join(words, " ")
}
