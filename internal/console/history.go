package console

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
)

// historyPageSize is how many versions one page of a history shows.
const historyPageSize = 100

type historyView struct {
	Store    storage.MemoryStoreRow
	MemoryID string
	// Memory is nil when the memory has been deleted: its history stays.
	Memory   *storage.MemoryRow
	Versions []storage.VersionRow
	Next     string
	Error    string
}

// historyPage lists a memory's versions newest first, one page of the
// version index at a time, with restore and redact on each.
func (c *Console) historyPage(w http.ResponseWriter, r *http.Request, q *request) error {
	return c.showHistory(w, r, q, http.StatusOK, "")
}

func (c *Console) showHistory(w http.ResponseWriter, r *http.Request, q *request, status int, msg string) error {
	s, err := c.loadStore(r)
	if err != nil {
		return err
	}
	v := historyView{Store: s, MemoryID: r.PathValue("memory"), Error: msg}
	if !ids.Valid(ids.Memory, v.MemoryID) {
		return notFound("%q is not a memory id; pick a memory in the store's tree", v.MemoryID)
	}
	if m, err := c.store.GetMemory(r.Context(), s.ID, v.MemoryID); err == nil {
		v.Memory = &m
	} else if !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	page, err := c.store.ListMemoryVersions(r.Context(), storage.MemoryVersionQuery{StoreID: s.ID, MemoryID: v.MemoryID, Limit: historyPageSize, Cursor: r.URL.Query().Get("page")})
	if errors.Is(err, storage.ErrBadCursor) {
		return badRequest("this page link is not valid any more; start from the first page")
	}
	if err != nil {
		return err
	}
	if len(page.Items) == 0 && v.Memory == nil {
		return notFound("memory %s has no versions in store %s; pick a memory in the store's tree", v.MemoryID, s.Name)
	}
	v.Versions, v.Next = page.Items, page.Next
	return c.render(w, r, q, status, "history", "History of "+historyTitle(v), v)
}

func historyTitle(v historyView) string {
	if v.Memory != nil {
		return v.Memory.Path
	}
	return v.MemoryID + " (deleted)"
}

// loadVersion reads the {store} and {version} of the URL.
func (c *Console) loadVersion(r *http.Request, id string) (storage.MemoryStoreRow, storage.VersionRow, error) {
	s, err := c.loadStore(r)
	if err != nil {
		return s, storage.VersionRow{}, err
	}
	if !ids.Valid(ids.MemoryVersion, id) {
		return s, storage.VersionRow{}, notFound("%q is not a memory version id; pick a version in a memory's history", id)
	}
	v, err := c.store.GetMemoryVersion(r.Context(), s.ID, id)
	if errors.Is(err, storage.ErrNotFound) {
		return s, v, notFound("memory version %s is not in store %s; pick a version in a memory's history", id, s.Name)
	}
	return s, v, err
}

type versionView struct {
	Store   storage.MemoryStoreRow
	Version storage.VersionRow
	// ToolUse is the id of the agent's tool call that most likely wrote a
	// version made by a session: its last tool call at or before the
	// version.
	ToolUse string
	// CanRedact offers Redact: the version has text and is not current.
	CanRedact bool
}

func (c *Console) versionPage(w http.ResponseWriter, r *http.Request, q *request) error {
	s, v, err := c.loadVersion(r, r.PathValue("version"))
	if err != nil {
		return err
	}
	view := versionView{Store: s, Version: v}
	refusal, err := c.redactRefusal(r.Context(), v)
	if err != nil {
		return err
	}
	view.CanRedact = refusal == ""
	if v.CreatedBy.Kind == storage.ActorSession {
		if view.ToolUse, err = c.writingToolUse(r, v); err != nil {
			return err
		}
	}
	return c.render(w, r, q, http.StatusOK, "version", "Version "+v.ID, view)
}

// writingToolUse finds the tool call that most likely wrote a session's
// version: the session's last agent.tool_use at or before the version
// landed whose input names the version's path (a write or an edit of
// that file), else its last tool call then (a bash command). "" when the
// session or its log is gone.
func (c *Console) writingToolUse(r *http.Request, v storage.VersionRow) (string, error) {
	events, err := c.store.ListEvents(r.Context(), v.CreatedBy.ID, storage.EventQuery{Types: []string{api.EventAgentToolUse}, Limit: 1000})
	if errors.Is(err, storage.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	last, naming := "", ""
	for _, e := range events {
		if e.Event.ProcessedAt == nil || e.Event.ProcessedAt.After(v.CreatedAt) {
			continue
		}
		last = e.Event.ID
		if v.Path != "" && strings.Contains(readableJSON(e.Event.Input), v.Path+`"`) {
			naming = e.Event.ID
		}
	}
	if naming != "" {
		return naming, nil
	}
	return last, nil
}

type diffView struct {
	Store    storage.MemoryStoreRow
	MemoryID string
	From, To storage.VersionRow
	Lines    []diffLine
}

// diffPage compares two versions of one memory line by line.
func (c *Console) diffPage(w http.ResponseWriter, r *http.Request, q *request) error {
	s, from, err := c.loadVersion(r, r.URL.Query().Get("from"))
	if err != nil {
		return err
	}
	_, to, err := c.loadVersion(r, r.URL.Query().Get("to"))
	if err != nil {
		return err
	}
	memoryID := r.PathValue("memory")
	if from.MemoryID != memoryID || to.MemoryID != memoryID {
		return badRequest("both versions must belong to memory %s; pick them in its history", memoryID)
	}
	v := diffView{Store: s, MemoryID: memoryID, From: from, To: to, Lines: lineDiff(from.Content, to.Content)}
	return c.render(w, r, q, http.StatusOK, "diff", "Changes from "+from.ID+" to "+to.ID, v)
}

// restoreVersion writes a past version's text as a new version of its
// memory (point-in-time recovery: nothing in the history is rewritten). A
// memory deleted since is created again at the version's path.
func (c *Console) restoreVersion(w http.ResponseWriter, r *http.Request, q *request) error {
	s, v, err := c.loadVersion(r, r.PathValue("version"))
	if err != nil {
		return err
	}
	r.SetPathValue("memory", v.MemoryID)
	m, err := c.app.Memories.Restore(r.Context(), s.ID, v, q.Caller())
	if errors.Is(err, app.ErrNoContent) {
		what := "was redacted"
		if !v.Redacted() {
			what = "records the memory's deletion"
		}
		return c.showHistory(w, r, q, http.StatusBadRequest, fmt.Sprintf("Version %s %s, so it holds no text to restore. Pick a version that has content.", v.ID, what))
	}
	if err != nil {
		if msg := storageRefusal(err); msg != "" {
			return c.showHistory(w, r, q, http.StatusConflict, "Nothing was restored. "+msg)
		}
		return err
	}
	http.Redirect(w, r, memoryURL(s.ID, m.ID), http.StatusSeeOther)
	return nil
}

// redactVersion clears a version's text for good, keeping the audit row.
func (c *Console) redactVersion(w http.ResponseWriter, r *http.Request, q *request) error {
	s, v, err := c.loadVersion(r, r.PathValue("version"))
	if err != nil {
		return err
	}
	r.SetPathValue("memory", v.MemoryID)
	if _, err := c.app.Memories.RedactVersion(r.Context(), s.ID, v.ID, q.Caller()); err != nil {
		if msg := storageRefusal(err); msg != "" {
			return c.showHistory(w, r, q, http.StatusBadRequest, "Nothing was redacted. "+msg)
		}
		return err
	}
	http.Redirect(w, r, "/console/stores/"+s.ID+"/memories/"+v.MemoryID+"/history", http.StatusSeeOther)
	return nil
}
