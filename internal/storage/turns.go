package storage

import (
	"context"
	"sync"

	"github.com/memstore/memstore/api"
)

// Turns lets one server at a time run a session's turn: the agent
// runtime's reaction to the session's log, which may include a model call
// of several seconds. Every server sharing a database may be woken for the
// same event; only the one that takes the turn reacts, so the others do
// not pay for the same model call. The append guard, not the turn, is what
// keeps an event from being emitted twice: a turn can be lost (its holder's
// connection drops) while its holder still works.
type Turns interface {
	// TryTurn takes sessionID's turn unless another holder has it, in this
	// process or, on a shared database, in another server (ok is false
	// then). The turn is held until release is called, or until the
	// holder's process dies: a crashed server never keeps a session's turn.
	TryTurn(ctx context.Context, sessionID string) (release func(), ok bool, err error)
	// TurnCandidates lists, in id order after after, up to limit of the
	// sessions whose log may call for a turn (TurnCandidate says which),
	// for a sweep that takes up the turns of servers that died. The
	// runtime decides whether each really does.
	TurnCandidates(ctx context.Context, after string, limit int) ([]TurnCandidate, error)
}

// TurnCandidate is a session whose log may call for a turn: one in the
// middle of a turn (its status is one of MidTurn), or an idle one whose
// newest event came from a client (its type starts with ClientEventPrefix;
// a user.message stored by a server that died before its runtime
// reacted). Archived and terminated sessions are never candidates. Seq is
// the session's newest event's.
type TurnCandidate struct {
	SessionID string
	Status    string
	Seq       int64
}

// MidTurn are the statuses of a session in the middle of a turn.
var MidTurn = []string{api.SessionRunning, api.SessionRescheduling}

// ClientEventPrefix starts the type of every event a client sends.
const ClientEventPrefix = "user."

// TurnSet is the part of Turns that one process decides alone: which
// sessions' turns it holds. A backend only one process uses (SQLite) needs
// nothing more; a shared one (PostgreSQL) takes a database lock as well.
type TurnSet struct {
	mu   sync.Mutex
	held map[string]bool
}

// Take takes sessionID's turn in this process, unless it is held.
func (t *TurnSet) Take(sessionID string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held[sessionID] {
		return false
	}
	if t.held == nil {
		t.held = map[string]bool{}
	}
	t.held[sessionID] = true
	return true
}

// Drop releases sessionID's turn in this process.
func (t *TurnSet) Drop(sessionID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.held, sessionID)
}

// TryTurn implements Turns for a backend only one process uses.
func (t *TurnSet) TryTurn(_ context.Context, sessionID string) (func(), bool, error) {
	if !t.Take(sessionID) {
		return nil, false, nil
	}
	return func() { t.Drop(sessionID) }, true, nil
}
