package app

import (
	"log/slog"

	"github.com/memstore/memstore/internal/storage"
)

// Caller is who asks for a change: the actor its memory versions record,
// and how the log names it — the API by the credential's id
// (credential_id), the console by the person's (user_id).
type Caller struct {
	Actor storage.Actor
	// LogKey and LogID name the caller on the log line of the change.
	LogKey, LogID string
}

// attr is the caller's attribute on a log line.
func (c Caller) attr() slog.Attr { return slog.String(c.LogKey, c.LogID) }

// firstError returns the first error that is not nil.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
