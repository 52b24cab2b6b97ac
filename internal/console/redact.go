package console

import (
	"context"
	"errors"
	"net/http"

	"github.com/memstore/memstore/internal/storage"
)

// redactRefusal says why version v cannot be redacted, "" when it can:
// the pages offer Redact only where it would succeed, and the
// confirmation page says why not instead of showing a button that fails.
func (c *Console) redactRefusal(ctx context.Context, v storage.VersionRow) (string, error) {
	switch {
	case v.Redacted():
		return "This version is already redacted: its text is gone.", nil
	case !v.HasContent():
		return "This version records the memory's deletion: it holds no text to redact.", nil
	}
	m, err := c.store.GetMemory(ctx, v.StoreID, v.MemoryID)
	if errors.Is(err, storage.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if m.VersionID == v.ID {
		return storageRefusal(storage.ErrRedactHead), nil
	}
	return "", nil
}

type redactView struct {
	Store   storage.MemoryStoreRow
	Version storage.VersionRow
	// Refusal is why the version cannot be redacted; then no form shows.
	Refusal string
	Error   string
}

// redactConfirmPage asks before a redaction, which nothing can undo: it
// shows the text that would be erased and a form whose submit confirms.
// It is a page, not a script's confirm(), so it asks without script too.
func (c *Console) redactConfirmPage(w http.ResponseWriter, r *http.Request, q *request) error {
	return c.showRedactConfirm(w, r, q, http.StatusOK, "")
}

func (c *Console) showRedactConfirm(w http.ResponseWriter, r *http.Request, q *request, status int, msg string) error {
	s, v, err := c.loadVersion(r, r.PathValue("version"))
	if err != nil {
		return err
	}
	refusal, err := c.redactRefusal(r.Context(), v)
	if err != nil {
		return err
	}
	if refusal != "" && status == http.StatusOK {
		status = http.StatusConflict
	}
	return c.render(w, r, q, status, "redact", "Redact version "+v.ID, redactView{Store: s, Version: v, Refusal: refusal, Error: msg})
}

// confirmedRedaction lets a redaction through only from the confirmation
// page's form (confirm=yes); any other POST gets that page, and nothing
// changes.
func (c *Console) confirmedRedaction(redact func(http.ResponseWriter, *http.Request, *request) error) func(http.ResponseWriter, *http.Request, *request) error {
	return func(w http.ResponseWriter, r *http.Request, q *request) error {
		if r.PostFormValue("confirm") != "yes" {
			return c.showRedactConfirm(w, r, q, http.StatusBadRequest, "Nothing was redacted yet: a redaction erases the text for good, so confirm it below.")
		}
		return redact(w, r, q)
	}
}
