package sqlstore

import (
	"context"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// TurnCandidates implements storage.Turns. An idle session costs one
// lookup of its newest event in the (session_id, seq) index.
func (s *Store) TurnCandidates(ctx context.Context, after string, limit int) ([]storage.TurnCandidate, error) {
	marks, midTurn := inList(storage.MidTurn)
	args := append(append([]any{after}, midTurn...), api.SessionIdle, storage.ClientEventPrefix, limitArg(limit))
	return queryAll(ctx, s.db(), func(r Row) (storage.TurnCandidate, error) {
		var c storage.TurnCandidate
		err := r.Scan(&c.SessionID, &c.Status, &c.Seq)
		return c, err
	}, `SELECT s.id, s.status, coalesce(l.seq, 0) FROM sessions s
		LEFT JOIN session_events l ON l.seq = (SELECT max(seq) FROM session_events WHERE session_id = s.id)
		WHERE s.id > ? AND s.archived_at IS NULL AND (s.status IN `+marks+` OR (s.status = ? AND l.type LIKE ? || '%'))
		ORDER BY s.id LIMIT ?`, args...)
}
