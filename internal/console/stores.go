package console

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/retention"
	"github.com/memstore/memstore/internal/storage"
)

// storeRow is one line of the stores page.
type storeRow struct {
	storage.MemoryStoreRow
	storage.StoreUsage
}

func (c *Console) storesPage(w http.ResponseWriter, r *http.Request, q *request) error {
	return c.showStores(w, r, q, http.StatusOK, "", "")
}

func (c *Console) showStores(w http.ResponseWriter, r *http.Request, q *request, status int, formErr, name string) error {
	ctx := r.Context()
	page, err := c.store.ListMemoryStores(ctx, storage.MemoryStoreQuery{Limit: api.MaxListLimit, Cursor: r.URL.Query().Get("page"), IncludeArchived: true})
	if errors.Is(err, storage.ErrBadCursor) {
		return badRequest("this page link is not valid any more; start from the first page")
	}
	if err != nil {
		return err
	}
	rows := make([]storeRow, 0, len(page.Items))
	for _, s := range page.Items {
		usage, err := c.store.MemoryStoreUsage(ctx, s.ID, "/")
		if err != nil {
			return err
		}
		rows = append(rows, storeRow{MemoryStoreRow: s, StoreUsage: usage})
	}
	return c.render(w, r, q, status, "stores", "Memory stores", struct {
		Stores      []storeRow
		Next        string
		Error, Name string
	}{rows, page.Next, formErr, name})
}

func (c *Console) createStore(w http.ResponseWriter, r *http.Request, q *request) error {
	name, desc := r.PostFormValue("name"), r.PostFormValue("description")
	s, err := c.app.MemoryStores.Create(r.Context(), storage.NewMemoryStore{Name: name, Description: desc}, q.Caller())
	if msg := invalid(err); msg != "" {
		return c.showStores(w, r, q, http.StatusBadRequest, msg, name)
	}
	if err != nil {
		return err
	}
	http.Redirect(w, r, storeURL(s.ID), http.StatusSeeOther)
	return nil
}

// loadStore reads the {store} of the URL.
func (c *Console) loadStore(r *http.Request) (storage.MemoryStoreRow, error) {
	id := r.PathValue("store")
	if !ids.Valid(ids.MemoryStore, id) {
		return storage.MemoryStoreRow{}, notFound("%q is not a memory store id; pick a store from the list", id)
	}
	s, err := c.store.GetMemoryStore(r.Context(), id)
	if errors.Is(err, storage.ErrNotFound) {
		return s, notFound("memory store %s does not exist (it may have been deleted); pick a store from the list", id)
	}
	return s, err
}

func storeURL(id string) string { return "/console/stores/" + id + "/" }

func (c *Console) storeSettings(w http.ResponseWriter, r *http.Request, q *request) error {
	s, err := c.loadStore(r)
	if err != nil {
		return err
	}
	return c.showSettings(w, r, q, http.StatusOK, s, "")
}

func (c *Console) showSettings(w http.ResponseWriter, r *http.Request, q *request, status int, s storage.MemoryStoreRow, formErr string) error {
	n, err := c.store.CountMemories(r.Context(), s.ID)
	if err != nil {
		return err
	}
	policy, inherited := c.app.RetentionOf(s)
	return c.render(w, r, q, status, "settings", "Settings of "+s.Name, struct {
		Store              storage.MemoryStoreRow
		Memories           int
		Retention          retention.Policy
		RetentionInherited bool
		Error              string
	}{s, n, policy, inherited, formErr})
}

func (c *Console) updateStore(w http.ResponseWriter, r *http.Request, q *request) error {
	s, err := c.loadStore(r)
	if err != nil {
		return err
	}
	name, desc := r.PostFormValue("name"), r.PostFormValue("description")
	if _, err := c.app.MemoryStores.Update(r.Context(), s.ID, storage.MemoryStorePatch{Name: &name, Description: &desc}, q.Caller()); err != nil {
		if msg := invalid(err); msg != "" {
			return c.showSettings(w, r, q, http.StatusBadRequest, s, msg)
		}
		if msg := storageRefusal(err); msg != "" {
			return c.showSettings(w, r, q, http.StatusConflict, s, msg)
		}
		return err
	}
	http.Redirect(w, r, storeURL(s.ID)+"settings", http.StatusSeeOther)
	return nil
}

func (c *Console) archiveStore(w http.ResponseWriter, r *http.Request, q *request) error {
	s, err := c.loadStore(r)
	if err != nil {
		return err
	}
	if _, err := c.app.MemoryStores.Archive(r.Context(), s.ID, q.Caller()); err != nil {
		return err
	}
	http.Redirect(w, r, storeURL(s.ID)+"settings", http.StatusSeeOther)
	return nil
}

// deleteStore needs the store's name typed back: it deletes every memory
// and every version, which nothing can bring back.
func (c *Console) deleteStore(w http.ResponseWriter, r *http.Request, q *request) error {
	s, err := c.loadStore(r)
	if err != nil {
		return err
	}
	if r.PostFormValue("confirm") != s.Name {
		return c.showSettings(w, r, q, http.StatusBadRequest, s, fmt.Sprintf("Nothing was deleted: type the store's name, %q, exactly, to confirm.", s.Name))
	}
	if err := c.app.MemoryStores.Delete(r.Context(), s.ID, q.Caller()); err != nil {
		if msg := storageRefusal(err); msg != "" {
			return c.showSettings(w, r, q, http.StatusConflict, s, msg)
		}
		return err
	}
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
	return nil
}

// invalid words a validation refusal of the service layer (an *api.Error:
// a field the person filled wrongly) for the form; "" when err is not one.
func invalid(err error) string {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.Message
	}
	return ""
}

// explain turns a validator's or the API's error into the sentence shown
// beside a form.
func explain(err error) string {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.Message
	}
	return err.Error()
}

// storageRefusal words a storage rule's refusal for a person; "" when err
// is not one (then it is a server failure).
func storageRefusal(err error) string {
	var (
		conflict *storage.PathConflictError
		stale    *storage.PreconditionFailedError
		full     *storage.StoreFullError
		inUse    *storage.StoreInUseError
	)
	switch {
	case errors.Is(err, storage.ErrStoreArchived):
		return "This store is archived, so it is read-only: memories can be read, deleted and redacted, but not created or changed. Copy what you need into another store."
	case errors.Is(err, storage.ErrRedactHead):
		return "This version is the memory's current content, and a memory that still exists must keep its content. Edit the memory (or delete it) first; then this version can be redacted."
	case errors.As(err, &conflict):
		return fmt.Sprintf("The path is taken: the memory at %s is in the way (a path cannot be reused, and /a and /a/b cannot both exist). Choose another path, or edit that memory.", conflict.Path)
	case errors.As(err, &stale):
		return "Someone changed this memory since you opened it."
	case errors.As(err, &full):
		return fmt.Sprintf("This store already holds %d memories, its limit. Delete memories it no longer needs; existing memories can still be edited.", full.Limit)
	case errors.As(err, &inUse):
		return fmt.Sprintf("Nothing was deleted: session %s (%s) may still mount this store. Archive or delete that session and let its worker stop, or archive the store instead.", inUse.SessionID, inUse.Status)
	case errors.Is(err, storage.ErrNotFound):
		return "It no longer exists: someone deleted it meanwhile."
	}
	return ""
}

// trimmedLines is s with Windows line ends turned into \n: a browser
// submits a textarea with \r\n, which would otherwise change every line
// of a memory on save.
func trimmedLines(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }
