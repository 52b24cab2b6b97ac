package sqlite

import "context"

// TryTurn implements storage.Turns: one process owns the file, so the
// turns it holds are all there are.
func (s *DB) TryTurn(ctx context.Context, sessionID string) (func(), bool, error) {
	return s.turns.TryTurn(ctx, sessionID)
}
