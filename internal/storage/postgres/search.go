package postgres

import (
	"encoding/binary"
	"hash/maphash"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/memstore/memstore/internal/storage"
)

// tsIndex is the tsvector column memories.search (migration 0008).
type tsIndex struct{}

// Query matches every term, an AND of the words as a tsquery (terms are
// storage.SearchWords, the words Entry indexes, holding only letters and
// digits, so none needs escaping), and ranks by ts_rank only the newest
// storage.SearchCandidates matches in the stores (ids grow with creation
// time): ts_rank reads each match's whole tsvector, so ranking every match
// of a common word costs hundreds of milliseconds, while picking the
// candidates reads only ids (the GIN index for a rare word, the primary key
// backwards for a common one, as the planner judges). It reads the content
// of the page only.
func (tsIndex) Query(terms []string, stores int, subtree bool) (string, string) {
	var b strings.Builder
	b.WriteString(`SELECT h.id, h.store_id, h.path, h.content_sha256, h.content_size_bytes, h.version_id, h.created_at, h.updated_at, ` +
		`v.content, h.score ` +
		`FROM (SELECT m.id, m.store_id, m.path, m.content_sha256, m.content_size_bytes, m.version_id, m.created_at, m.updated_at, ts_rank(m.search, c.q)::float8 AS score ` +
		`FROM (SELECT m.id, q FROM memories m, CAST(? AS tsquery) q WHERE m.search @@ q AND m.store_id IN (?`)
	b.WriteString(strings.Repeat(", ?", stores-1))
	b.WriteString(`)`)
	if subtree {
		b.WriteString(` AND m.path >= ? AND m.path < ?`)
	}
	b.WriteString(` ORDER BY m.id DESC LIMIT ` + strconv.Itoa(storage.SearchCandidates) + `) c JOIN memories m ON m.id = c.id ` +
		`ORDER BY score DESC, m.id LIMIT ? OFFSET ?) h JOIN memory_versions v ON v.id = h.version_id ORDER BY h.score DESC, h.id`)
	quoted := make([]string, len(terms))
	for i, t := range terms {
		quoted[i] = "'" + t + "'"
	}
	return b.String(), strings.Join(quoted, " & ")
}

// Entry computes the memory's tsvector here, in the server, and the write
// stores it in memories.search: PostgreSQL's text parser cost a 4 KB memory
// half a millisecond of the backend that holds the store's row lock, so one
// store's writes queued behind it (docs/postgresql-performance.md). It
// travels in the binary form: a one-row INSERT of the entry cost that
// backend 30.5 µs from the text form and 9.5 from the binary for the
// benchmarks' 4 KB of one word, 93 and 14 for 4 KB of prose
// (BenchmarkSearchEntryOnTheBackend). The words are storage.SearchWords, the rule the query's
// words follow too, so what a write indexes is what a search asks for by
// construction. The trigger (migration 0012) computes the entry itself for
// a row written without one.
func (tsIndex) Entry(path, content string) (string, any) {
	return "search", searchEntry(path, content)
}

// Limits of a tsvector that to_tsvector keeps to as well: a lexeme is
// shorter than 2,047 bytes (longer words are not indexed), a position is at
// most 16,383 (later words count as 16,383), a lexeme keeps its first 255
// positions in one text and its first 256 in the path's and the content's
// together.
const (
	maxLexemeBytes = 2047
	maxPosition    = 16383
	maxTextPoints  = 255
	maxPoints      = 256
)

// searchEntry is the tsvector that setweight(words(path), 'A') ||
// words(content) is: the path's words with weight A at positions 1…, then
// the content's words (weight D) after the path's last position, as
// memory_search_document builds it (migrations 0008 and 0012), so ts_rank
// weighs a path word over a content word as before.
// TestSearchEntriesFromTheServerAreTheDatabasesOwn holds the two to the
// same entries.
func searchEntry(path, content string) tsvectorBinary {
	var t lexemes
	t.add(path, weightA)
	t.add(content, 0)
	return t.binary()
}

// weightA marks a position of weight A, in its top bit.
const weightA = 1 << 15

// lexemes are a tsvector's entries as the words of its texts are read: by
// first appearance, found in an open-addressed table by the word's hash,
// so a word that is not new costs no allocation. With a map, looking each
// word up was a third of the entry's time, and the entry a third of the
// create and update handlers' CPU (docs/postgresql-performance.md). The hash is
// keyed by a seed of the process's own (hash/maphash), as Go's maps are: a
// fixed hash let a memory's words be chosen to collide, and 100 KB of them
// cost 160–217 ms to index instead of 3.
type lexemes struct {
	entries []lexeme
	// slots hold entry indexes plus one (0: empty); their count is a
	// power of two at least twice the entries'.
	slots []int32
	pos   int
	buf   []byte
}

type lexeme struct {
	word      string
	hash      uint64
	positions []uint16 // weight A in the top bit
	inText    int      // positions kept from the text being read
}

// lexemeSeed keys the lexemes' hash for the life of the process.
var lexemeSeed = maphash.MakeSeed()

// add reads the words of text, storage.SearchWords' rule (storage.WordByte
// and storage.WordRune, lower-cased as strings.ToLower does), at weight.
func (t *lexemes) add(text string, weight uint16) {
	for i := range t.entries {
		t.entries[i].inText = 0
	}
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf && !storage.WordByte(c) {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(text[i:])
			if !storage.WordRune(r) {
				i += size
				continue
			}
		}
		start, ascii := i, true
		t.buf = t.buf[:0]
		for i < len(text) {
			c := text[i]
			if c < utf8.RuneSelf {
				if !storage.WordByte(c) {
					break
				}
				if 'A' <= c && c <= 'Z' {
					c += 'a' - 'A'
				}
				t.buf = append(t.buf, c)
				i++
				continue
			}
			r, size := utf8.DecodeRuneInString(text[i:])
			if !storage.WordRune(r) {
				break
			}
			ascii = false
			i += size
		}
		if !ascii {
			t.buf = append(t.buf[:0], strings.ToLower(text[start:i])...)
		}
		t.see(t.buf, weight)
	}
}

// see counts one word at the next position.
func (t *lexemes) see(word []byte, weight uint16) {
	if len(word) >= maxLexemeBytes {
		return
	}
	t.pos = min(t.pos+1, maxPosition)
	e := &t.entries[t.find(word, maphash.Bytes(lexemeSeed, word))]
	n := len(e.positions)
	if e.inText < maxTextPoints && n < maxPoints && (n == 0 || int(e.positions[n-1]&^weightA) != t.pos) {
		e.positions = append(e.positions, uint16(t.pos)|weight)
		e.inText++
	}
}

// find returns the index of word's entry, made if it is new.
func (t *lexemes) find(word []byte, h uint64) int {
	if 2*(len(t.entries)+1) > len(t.slots) {
		t.grow()
	}
	mask := uint64(len(t.slots) - 1)
	for j := h & mask; ; j = (j + 1) & mask {
		s := t.slots[j]
		if s == 0 {
			t.entries = append(t.entries, lexeme{word: string(word), hash: h})
			t.slots[j] = int32(len(t.entries))
			return len(t.entries) - 1
		}
		if e := &t.entries[s-1]; e.hash == h && e.word == string(word) {
			return int(s - 1)
		}
	}
}

// grow doubles the slots (64 at first) and places the entries again.
func (t *lexemes) grow() {
	t.slots = make([]int32, max(64, 2*len(t.slots)))
	mask := uint64(len(t.slots) - 1)
	for i, e := range t.entries {
		j := e.hash & mask
		for t.slots[j] != 0 {
			j = (j + 1) & mask
		}
		t.slots[j] = int32(i + 1)
	}
}

// binary is the tsvector's binary form, as PostgreSQL's tsvectorrecv
// reads it: the lexeme count, then each lexeme's bytes, a NUL, its count
// of positions and its positions (big-endian; the weight in the top two
// bits, A being 3). Positions are strictly increasing, as it requires;
// the lexemes go in the order they were read, which it sorts.
func (t *lexemes) binary() tsvectorBinary {
	size := 4
	for _, e := range t.entries {
		size += len(e.word) + 3 + 2*len(e.positions)
	}
	b := make([]byte, 0, size)
	b = binary.BigEndian.AppendUint32(b, uint32(len(t.entries)))
	for _, e := range t.entries {
		b = append(b, e.word...)
		b = append(b, 0)
		b = binary.BigEndian.AppendUint16(b, uint16(len(e.positions)))
		for _, p := range e.positions {
			if p&weightA != 0 {
				p = p&^weightA | 3<<14
			}
			b = binary.BigEndian.AppendUint16(b, p)
		}
	}
	return b
}

// tsvectorBinary is a tsvector in its binary form, which pgx sends as it
// is (tsvectorCodec).
type tsvectorBinary []byte

// tsvectorCodec is pgx's tsvector codec, which also sends a tsvectorBinary
// as it is; registered on every connection (registerTypes).
type tsvectorCodec struct{ pgtype.TSVectorCodec }

func (c tsvectorCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(tsvectorBinary); ok {
		if format == pgtype.BinaryFormatCode {
			return encodeTSVectorBinary{}
		}
		return nil
	}
	return c.TSVectorCodec.PlanEncode(m, oid, format, value)
}

type encodeTSVectorBinary struct{}

func (encodeTSVectorBinary) Encode(value any, buf []byte) ([]byte, error) {
	return append(buf, value.(tsvectorBinary)...), nil
}
