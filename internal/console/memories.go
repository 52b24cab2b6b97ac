package console

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/validate"
)

// treePageSize is how many entries one page of a store's tree shows.
const treePageSize = 100

// treeRow is one entry of a folder: a sub-folder or a memory with who
// changed it last.
type treeRow struct {
	Folder string
	// Usage sums up a folder's memories.
	Usage  storage.StoreUsage
	Memory *storage.MemoryRow
	By     storage.Actor
}

type treeView struct {
	Store       storage.MemoryStoreRow
	Memories    int
	Prefix      string
	Crumbs      []crumb
	Filter      string
	Rows        []treeRow
	Next        string
	Error       string
	NewPath     string
	NewContent  string
	ReadOnly    bool
	FilterShown bool
}

type crumb struct{ Name, Prefix string }

// treePage shows one folder of a store (depth 1, deeper paths rolled up
// into folders), or with a filter every memory whose path starts with it.
// Either way it reads one page of the path index, so a store of 10,000
// memories opens as fast as one of ten.
func (c *Console) treePage(w http.ResponseWriter, r *http.Request, q *request) error {
	s, err := c.loadStore(r)
	if err != nil {
		return err
	}
	return c.showTree(w, r, q, http.StatusOK, s, treeView{})
}

func (c *Console) showTree(w http.ResponseWriter, r *http.Request, q *request, status int, s storage.MemoryStoreRow, v treeView) error {
	ctx := r.Context()
	v.Store, v.ReadOnly = s, s.Archived()
	v.Prefix = r.URL.Query().Get("prefix")
	if v.Prefix == "" {
		v.Prefix = "/"
	}
	if err := validate.PathPrefix("prefix", v.Prefix); err != nil {
		return badRequest("%s", explain(err))
	}
	v.Filter = r.URL.Query().Get("filter")
	query := storage.MemoryQuery{StoreID: s.ID, Prefix: v.Prefix, Depth: 1, Limit: treePageSize, Cursor: r.URL.Query().Get("page")}
	if v.Filter != "" {
		v.FilterShown = true
		if !strings.HasPrefix(v.Filter, "/") {
			v.Filter = "/" + v.Filter
		}
		// The filter's folder is listed whole and cut to the filter:
		// paths are in byte order, so the matches are one run of it.
		query.Prefix, query.Depth = v.Filter[:strings.LastIndexByte(v.Filter, '/')+1], 0
		if err := validate.PathPrefix("filter", query.Prefix); err != nil {
			return badRequest("%s", explain(err))
		}
	}
	v.Crumbs = crumbs(v.Prefix)
	var err error
	if v.Memories, err = c.store.CountMemories(ctx, s.ID); err != nil {
		return err
	}
	for {
		page, err := c.store.ListMemories(ctx, query)
		if errors.Is(err, storage.ErrBadCursor) {
			return badRequest("this page link is not valid any more; start from the first page")
		}
		if err != nil {
			return err
		}
		past := false
		for _, it := range page.Items {
			if it.Prefix != "" {
				usage, err := c.store.MemoryStoreUsage(ctx, s.ID, it.Prefix)
				if err != nil {
					return err
				}
				v.Rows = append(v.Rows, treeRow{Folder: it.Prefix, Usage: usage})
				continue
			}
			if v.Filter != "" && !strings.HasPrefix(it.Memory.Path, v.Filter) {
				past = past || it.Memory.Path > v.Filter
				continue
			}
			row := treeRow{Memory: &it.Memory}
			head, err := c.store.ListMemoryVersions(ctx, storage.MemoryVersionQuery{StoreID: s.ID, MemoryID: it.Memory.ID, Limit: 1})
			if err != nil {
				return err
			}
			if len(head.Items) > 0 {
				row.By = head.Items[0].CreatedBy
			}
			v.Rows = append(v.Rows, row)
		}
		v.Next = page.Next
		if past {
			v.Next = ""
		}
		// A filtered page that matched nothing yet reads on until it finds
		// matches or passes them.
		if v.Filter == "" || len(v.Rows) > 0 || v.Next == "" {
			break
		}
		query.Cursor = v.Next
	}
	title := s.Name
	if v.Prefix != "/" {
		title += " " + v.Prefix
	}
	return c.render(w, r, q, status, "tree", title, v)
}

// crumbs splits a folder prefix into links to each ancestor.
func crumbs(prefix string) []crumb {
	out := []crumb{{Name: "/", Prefix: "/"}}
	segs := strings.Split(strings.Trim(prefix, "/"), "/")
	p := "/"
	for _, seg := range segs {
		if seg == "" {
			continue
		}
		p += seg + "/"
		out = append(out, crumb{Name: seg + "/", Prefix: p})
	}
	return out
}

func (c *Console) createMemory(w http.ResponseWriter, r *http.Request, q *request) error {
	s, err := c.loadStore(r)
	if err != nil {
		return err
	}
	path, content := r.PostFormValue("path"), trimmedLines(r.PostFormValue("content"))
	v := treeView{NewPath: path, NewContent: content}
	m, err := c.app.Memories.Create(r.Context(), s.ID, path, content, q.Caller())
	if err != nil {
		if v.Error = invalid(err); v.Error != "" {
			return c.showTree(w, r, q, http.StatusBadRequest, s, v)
		}
		if v.Error = storageRefusal(err); v.Error != "" {
			return c.showTree(w, r, q, http.StatusConflict, s, v)
		}
		return err
	}
	http.Redirect(w, r, memoryURL(s.ID, m.ID), http.StatusSeeOther)
	return nil
}

func memoryURL(storeID, memoryID string) string {
	return "/console/stores/" + storeID + "/memories/" + memoryID
}

// loadMemory reads the {store} and {memory} of the URL.
func (c *Console) loadMemory(r *http.Request) (storage.MemoryStoreRow, storage.MemoryRow, error) {
	s, err := c.loadStore(r)
	if err != nil {
		return s, storage.MemoryRow{}, err
	}
	id := r.PathValue("memory")
	if !ids.Valid(ids.Memory, id) {
		return s, storage.MemoryRow{}, notFound("%q is not a memory id; pick a memory in the store's tree", id)
	}
	m, err := c.store.GetMemory(r.Context(), s.ID, id)
	if errors.Is(err, storage.ErrNotFound) {
		return s, m, notFound("memory %s is not in store %s any more (it may have been deleted); its history is still listed under the store's versions", id, s.Name)
	}
	return s, m, err
}

// editorView is the memory page: the stored memory, and what the editor
// holds (the stored text, or what the person typed when a save was
// refused).
type editorView struct {
	Store   storage.MemoryStoreRow
	Memory  storage.MemoryRow
	Content string
	Path    string
	// SHA is the content_sha256 the editor was opened at: the save's
	// precondition.
	SHA      string
	By       storage.Actor
	Error    string
	ReadOnly bool
	// Conflict is set when a save was refused because someone else changed
	// the memory: their text, who, and the diff from theirs to yours.
	Conflict *conflictView
}

type conflictView struct {
	Theirs string
	By     storage.Actor
	Diff   []diffLine
}

func (c *Console) memoryPage(w http.ResponseWriter, r *http.Request, q *request) error {
	s, m, err := c.loadMemory(r)
	if err != nil {
		return err
	}
	v := editorView{Content: derefString(m.Content), Path: m.Path, SHA: m.ContentSHA256}
	return c.showMemory(w, r, q, http.StatusOK, s, m, v)
}

func (c *Console) showMemory(w http.ResponseWriter, r *http.Request, q *request, status int, s storage.MemoryStoreRow, m storage.MemoryRow, v editorView) error {
	v.Store, v.Memory, v.ReadOnly = s, m, s.Archived()
	head, err := c.store.GetMemoryVersion(r.Context(), s.ID, m.VersionID)
	if err != nil {
		return err
	}
	v.By = head.CreatedBy
	return c.render(w, r, q, status, "memory", m.Path+" — "+s.Name, v)
}

// saveMemory saves the editor with the precondition it was opened at. When
// someone else changed the memory meanwhile nothing is saved: the page
// comes back with the person's text still in the editor and the other
// change beside it, so neither is lost; saving again (now against the
// other change) replaces it knowingly.
func (c *Console) saveMemory(w http.ResponseWriter, r *http.Request, q *request) error {
	s, m, err := c.loadMemory(r)
	if err != nil {
		return err
	}
	content, path, sha := trimmedLines(r.PostFormValue("content")), r.PostFormValue("path"), r.PostFormValue("sha")
	v := editorView{Content: content, Path: path, SHA: sha}
	change := app.MemoryChange{Content: &content, Expect: app.Expect{Field: "sha", SHA256: sha}}
	if path != m.Path {
		change.Path = &path
	}
	_, _, err = c.app.Memories.Update(r.Context(), s.ID, m.ID, change, q.Caller())
	var stale *storage.PreconditionFailedError
	switch {
	case invalid(err) != "":
		v.Error = invalid(err)
		return c.showMemory(w, r, q, http.StatusBadRequest, s, m, v)
	case errors.As(err, &stale):
		current, err := c.store.GetMemory(r.Context(), s.ID, m.ID)
		if err != nil {
			return err
		}
		theirs, err := c.store.GetMemoryVersion(r.Context(), s.ID, current.VersionID)
		if err != nil {
			return err
		}
		v.Conflict = &conflictView{Theirs: derefString(current.Content), By: theirs.CreatedBy, Diff: lineDiff(derefString(current.Content), content)}
		v.SHA = current.ContentSHA256
		c.log.InfoContext(r.Context(), "console save refused: the memory changed meanwhile", "memory_store_id", s.ID, "memory_id", m.ID, "path", m.Path, "user_id", q.User.ID)
		return c.showMemory(w, r, q, http.StatusConflict, s, current, v)
	case err != nil:
		if v.Error = storageRefusal(err); v.Error != "" {
			return c.showMemory(w, r, q, http.StatusConflict, s, m, v)
		}
		return err
	}
	http.Redirect(w, r, memoryURL(s.ID, m.ID), http.StatusSeeOther)
	return nil
}

func (c *Console) deleteMemory(w http.ResponseWriter, r *http.Request, q *request) error {
	s, m, err := c.loadMemory(r)
	if err != nil {
		return err
	}
	expect := app.Expect{Field: "sha", SHA256: r.PostFormValue("sha")}
	if err := c.app.Memories.Delete(r.Context(), s.ID, m.ID, expect, q.Caller()); err != nil {
		if msg := invalid(err); msg != "" {
			return badRequest("%s", msg)
		}
		var stale *storage.PreconditionFailedError
		if errors.As(err, &stale) {
			v := editorView{Content: derefString(m.Content), Path: m.Path, SHA: m.ContentSHA256,
				Error: "Nothing was deleted: someone changed this memory since you opened it. Its current text is below; delete again if it should still go."}
			return c.showMemory(w, r, q, http.StatusConflict, s, m, v)
		}
		return err
	}
	http.Redirect(w, r, storeURL(s.ID)+"?prefix="+url.QueryEscape(m.Path[:strings.LastIndexByte(m.Path, '/')+1]), http.StatusSeeOther)
	return nil
}
