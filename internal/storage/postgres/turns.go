package postgres

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/internal/storage"
)

// turnLockSeed seeds the hash that turns a session id into the key of its
// advisory lock, apart from other users of hashtextextended.
const turnLockSeed = 0x7475726e // "turn"

// turnLocks holds sessions' turns as session-level advisory locks on one
// connection of their own: PostgreSQL releases them all when that
// connection ends, so a server that dies (or loses the database) hands its
// turns to the others at once, with no lease to wait out. Advisory locks
// are re-entrant within a connection, so the turns this process holds are
// also kept in a TurnSet: a second runner of the same process is refused
// too.
type turnLocks struct {
	local storage.TurnSet

	mu   sync.Mutex
	conn *pgx.Conn // nil until first used, and after it failed
	cfg  *pgx.ConnConfig
}

// TryTurn implements storage.Turns.
func (s *DB) TryTurn(ctx context.Context, sessionID string) (func(), bool, error) {
	t := &s.turns
	if !t.local.Take(sessionID) {
		return nil, false, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conn == nil {
		conn, err := pgx.ConnectConfig(ctx, t.cfg)
		if err != nil {
			t.local.Drop(sessionID)
			return nil, false, unavailable(err)
		}
		t.conn = conn
	}
	var ok bool
	if err := t.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, $2))`, sessionID, turnLockSeed).Scan(&ok); err != nil {
		t.closeLocked()
		t.local.Drop(sessionID)
		return nil, false, unavailable(err)
	}
	if !ok {
		t.local.Drop(sessionID)
		return nil, false, nil
	}
	held := t.conn
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		// A connection that failed since took its locks with it.
		if t.conn == held {
			if _, err := t.conn.Exec(context.Background(), `SELECT pg_advisory_unlock(hashtextextended($1, $2))`, sessionID, turnLockSeed); err != nil {
				t.closeLocked()
			}
		}
		t.local.Drop(sessionID)
	}, true, nil
}

// closeLocked drops the connection, and with it every turn it held; t.mu
// is held.
func (t *turnLocks) closeLocked() {
	if t.conn != nil {
		t.conn.Close(context.Background())
		t.conn = nil
	}
}

func (t *turnLocks) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closeLocked()
}
