package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/storage"
)

// tools holds what every tool needs: the services and the credential check.
type tools struct {
	app          *app.App
	authenticate Authenticate
}

// Bounds that keep a tool's answer short enough for a model's context.
const (
	maxListedStores   = 200
	maxListedEntries  = 500
	maxStoreNameMatch = 1000
)

type listStoresIn struct{}

type viewIn struct {
	Store     string `json:"store" jsonschema:"the memory store's id or name"`
	Path      string `json:"path" jsonschema:"a memory's path (/notes/a.md) or a folder (/ or /notes)"`
	ViewRange []int  `json:"view_range,omitempty" jsonschema:"optional [first, last] line numbers to show, 1-based; last -1 means to the end"`
}

type createIn struct {
	Store    string `json:"store" jsonschema:"the memory store's id or name"`
	Path     string `json:"path" jsonschema:"the new memory's path, such as /notes/a.md"`
	FileText string `json:"file_text" jsonschema:"the memory's whole content"`
}

type strReplaceIn struct {
	Store  string `json:"store" jsonschema:"the memory store's id or name"`
	Path   string `json:"path" jsonschema:"the memory's path"`
	OldStr string `json:"old_str" jsonschema:"text that occurs exactly once in the memory"`
	NewStr string `json:"new_str" jsonschema:"the text to put in its place"`
}

type insertIn struct {
	Store      string `json:"store" jsonschema:"the memory store's id or name"`
	Path       string `json:"path" jsonschema:"the memory's path"`
	InsertLine int    `json:"insert_line" jsonschema:"the line after which to insert (0 inserts at the top)"`
	InsertText string `json:"insert_text" jsonschema:"the text to insert"`
}

type deleteIn struct {
	Store string `json:"store" jsonschema:"the memory store's id or name"`
	Path  string `json:"path" jsonschema:"the memory's path"`
}

type renameIn struct {
	Store   string `json:"store" jsonschema:"the memory store's id or name"`
	OldPath string `json:"old_path" jsonschema:"the memory's current path"`
	NewPath string `json:"new_path" jsonschema:"its new path"`
}

type searchIn struct {
	Query string `json:"query" jsonschema:"words to look for in memory paths and content"`
	Store string `json:"store,omitempty" jsonschema:"a store id or name; omitted searches every store this credential may read"`
}

// register adds the eight tools, named and shaped like Claude's memory tool
// commands with a store argument.
func (t *tools) register(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "memory_list_stores", Description: "List the memory stores this credential may read, with their ids, names and descriptions."}, text(t, t.listStores))
	mcp.AddTool(s, &mcp.Tool{Name: "memory_view", Description: "Show a memory's content with line numbers, or list a folder (path \"/\" lists the whole store)."}, text(t, t.view))
	mcp.AddTool(s, &mcp.Tool{Name: "memory_create", Description: "Create a new memory at a free path. It never overwrites: use memory_str_replace or memory_insert to change an existing one."}, text(t, t.create))
	mcp.AddTool(s, &mcp.Tool{Name: "memory_str_replace", Description: "Replace text that occurs exactly once in a memory; makes a new version."}, text(t, t.strReplace))
	mcp.AddTool(s, &mcp.Tool{Name: "memory_insert", Description: "Insert text after a line of a memory (0 inserts at the top); makes a new version."}, text(t, t.insert))
	mcp.AddTool(s, &mcp.Tool{Name: "memory_delete", Description: "Delete a memory; its past versions stay in the store's history."}, text(t, t.delete))
	mcp.AddTool(s, &mcp.Tool{Name: "memory_rename", Description: "Move a memory to a new path; its id and history stay."}, text(t, t.rename))
	mcp.AddTool(s, &mcp.Tool{Name: "memory_search", Description: "Find memories whose path or content contains the query (case-insensitive), in one store or every store this credential may read."}, text(t, t.search))
}

// text adapts a tool that answers in plain text to the SDK's handler: a
// refusal or failure becomes a tool error the model reads, not a protocol
// error, so it can correct itself.
func text[In any](t *tools, f func(ctx context.Context, acc Access, in In) (string, error)) mcp.ToolHandlerFor[In, any] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		if req.Extra == nil {
			return nil, nil, errors.New("no credential came with this call: connect over HTTP with an x-api-key header")
		}
		// Handler checked the credential before the call reached the SDK;
		// the tool sees only the headers, so it resolves them again.
		acc, err := t.authenticate(ctx, req.Extra.Header)
		if err != nil {
			return nil, nil, err
		}
		out, err := f(ctx, acc, in)
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out}}}, nil, nil
	}
}

func (t *tools) listStores(ctx context.Context, acc Access, _ listStoresIn) (string, error) {
	var b strings.Builder
	n := 0
	err := t.eachStore(ctx, func(st storage.MemoryStoreRow) bool {
		if acc.CheckStore(ctx, st.ID, false) != nil {
			return true
		}
		n++
		fmt.Fprintf(&b, "- %s  name=%q", st.ID, st.Name)
		if st.Archived() {
			b.WriteString("  (archived: read-only)")
		}
		if st.Description != "" {
			fmt.Fprintf(&b, "  %s", oneLine(st.Description, 120))
		}
		b.WriteString("\n")
		return n < maxListedStores
	})
	if err != nil {
		return "", err
	}
	if n == 0 {
		return "No memory stores this credential may read. Create one with `memstore store create` or the console.", nil
	}
	return fmt.Sprintf("%d memory store(s); pass the id or name as `store`:\n%s", n, b.String()), nil
}

func (t *tools) view(ctx context.Context, acc Access, in viewIn) (string, error) {
	st, err := t.store(ctx, acc, in.Store, false)
	if err != nil {
		return "", err
	}
	p, err := cleanPath(in.Path)
	if err != nil {
		return "", err
	}
	if m, err := t.memory(ctx, st.ID, p); err == nil {
		return numbered(p, *m.Content, in.ViewRange)
	} else if !errors.Is(err, storage.ErrNotFound) {
		return "", err
	}
	prefix := strings.TrimSuffix(p, "/") + "/"
	page, err := t.app.Store().ListMemories(ctx, storage.MemoryQuery{StoreID: st.ID, Prefix: prefix, Depth: 2, Limit: maxListedEntries})
	if err != nil {
		return "", err
	}
	if len(page.Items) == 0 {
		return "", fmt.Errorf("nothing at %s in store %s: view \"/\" to list the store, or memory_create to write a memory there", p, st.Name)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s in store %s:\n", prefix, st.Name)
	for _, e := range page.Items {
		if e.Prefix != "" {
			fmt.Fprintf(&b, "%s\n", e.Prefix)
			continue
		}
		fmt.Fprintf(&b, "%s  (%d bytes)\n", e.Memory.Path, e.Memory.ContentSizeBytes)
	}
	if page.Next != "" {
		fmt.Fprintf(&b, "(more than %d entries; view a subfolder to see the rest)\n", maxListedEntries)
	}
	return b.String(), nil
}

func (t *tools) create(ctx context.Context, acc Access, in createIn) (string, error) {
	st, err := t.store(ctx, acc, in.Store, true)
	if err != nil {
		return "", err
	}
	p, err := cleanPath(in.Path)
	if err != nil {
		return "", err
	}
	m, err := t.app.Memories.Create(ctx, st.ID, p, in.FileText, acc.Caller())
	if err != nil {
		return "", writeError(err, p)
	}
	return fmt.Sprintf("Created %s in store %s (%d bytes, memory %s, version %s).", m.Path, st.Name, m.ContentSizeBytes, m.ID, m.VersionID), nil
}

func (t *tools) strReplace(ctx context.Context, acc Access, in strReplaceIn) (string, error) {
	return t.edit(ctx, acc, in.Store, in.Path, func(content string) (string, string, error) {
		if in.OldStr == "" {
			return "", "", errors.New("old_str is empty: give the exact text to replace, copied from memory_view (without the line numbers)")
		}
		switch n := strings.Count(content, in.OldStr); n {
		case 0:
			return "", "", errors.New("old_str does not occur in the memory: memory_view it and copy the text exactly (without the line numbers)")
		case 1:
		default:
			return "", "", fmt.Errorf("old_str occurs %d times in the memory: include more surrounding text so it occurs once", n)
		}
		return strings.Replace(content, in.OldStr, in.NewStr, 1), "Replaced the text", nil
	})
}

func (t *tools) insert(ctx context.Context, acc Access, in insertIn) (string, error) {
	return t.edit(ctx, acc, in.Store, in.Path, func(content string) (string, string, error) {
		lines := strings.SplitAfter(content, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		if in.InsertLine < 0 || in.InsertLine > len(lines) {
			return "", "", fmt.Errorf("insert_line %d is outside the memory, which has %d lines: give 0 to %d", in.InsertLine, len(lines), len(lines))
		}
		text := in.InsertText
		if !strings.HasSuffix(text, "\n") && in.InsertLine < len(lines) {
			text += "\n"
		}
		if in.InsertLine == len(lines) && len(lines) > 0 && !strings.HasSuffix(lines[len(lines)-1], "\n") {
			text = "\n" + text
		}
		out := strings.Join(lines[:in.InsertLine], "") + text + strings.Join(lines[in.InsertLine:], "")
		return out, fmt.Sprintf("Inserted the text after line %d", in.InsertLine), nil
	})
}

// edit reads a memory, changes its content with change, and writes it back
// only if nobody wrote it in between (the content hash it read is the
// precondition), so a concurrent write is never lost.
func (t *tools) edit(ctx context.Context, acc Access, store, rawPath string, change func(string) (string, string, error)) (string, error) {
	st, err := t.store(ctx, acc, store, true)
	if err != nil {
		return "", err
	}
	p, err := cleanPath(rawPath)
	if err != nil {
		return "", err
	}
	m, err := t.memory(ctx, st.ID, p)
	if err != nil {
		return "", notFound(err, p, st.Name)
	}
	content, what, err := change(*m.Content)
	if err != nil {
		return "", err
	}
	row, changed, err := t.app.Memories.Update(ctx, st.ID, m.ID, app.MemoryChange{
		Content: &content,
		Expect:  app.Expect{Field: "content_sha256", SHA256: m.ContentSHA256},
	}, acc.Caller())
	if err != nil {
		return "", writeError(err, p)
	}
	if !changed {
		return fmt.Sprintf("%s in %s; the content is unchanged, so no new version was made (still %s).", what, p, row.VersionID), nil
	}
	return fmt.Sprintf("%s in %s (store %s): new version %s, %d bytes.", what, p, st.Name, row.VersionID, row.ContentSizeBytes), nil
}

func (t *tools) delete(ctx context.Context, acc Access, in deleteIn) (string, error) {
	st, err := t.store(ctx, acc, in.Store, true)
	if err != nil {
		return "", err
	}
	p, err := cleanPath(in.Path)
	if err != nil {
		return "", err
	}
	m, err := t.memory(ctx, st.ID, p)
	if err != nil {
		return "", notFound(err, p, st.Name)
	}
	if err := t.app.Memories.Delete(ctx, st.ID, m.ID, app.Expect{Field: "content_sha256", SHA256: m.ContentSHA256}, acc.Caller()); err != nil {
		return "", writeError(err, p)
	}
	return fmt.Sprintf("Deleted %s from store %s (memory %s); its versions stay in the history.", p, st.Name, m.ID), nil
}

func (t *tools) rename(ctx context.Context, acc Access, in renameIn) (string, error) {
	st, err := t.store(ctx, acc, in.Store, true)
	if err != nil {
		return "", err
	}
	from, err := cleanPath(in.OldPath)
	if err != nil {
		return "", err
	}
	to, err := cleanPath(in.NewPath)
	if err != nil {
		return "", err
	}
	m, err := t.memory(ctx, st.ID, from)
	if err != nil {
		return "", notFound(err, from, st.Name)
	}
	row, _, err := t.app.Memories.Update(ctx, st.ID, m.ID, app.MemoryChange{Path: &to}, acc.Caller())
	if err != nil {
		return "", writeError(err, to)
	}
	return fmt.Sprintf("Renamed %s to %s in store %s: new version %s.", from, row.Path, st.Name, row.VersionID), nil
}

func (t *tools) search(ctx context.Context, acc Access, in searchIn) (string, error) {
	q := strings.TrimSpace(in.Query)
	if q == "" {
		return "", errors.New("query is empty: give a word or phrase to look for")
	}
	var stores []storage.MemoryStoreRow
	if in.Store != "" {
		st, err := t.store(ctx, acc, in.Store, false)
		if err != nil {
			return "", err
		}
		stores = append(stores, st)
	} else if err := t.eachStore(ctx, func(st storage.MemoryStoreRow) bool {
		if acc.CheckStore(ctx, st.ID, false) == nil {
			stores = append(stores, st)
		}
		return len(stores) < maxListedStores
	}); err != nil {
		return "", err
	}
	// The credential's reach is the stores it was just allowed to read;
	// the full-text index (app.Search) ranks their memories.
	names := make(map[string]string, len(stores))
	reach := app.Reach{}
	for _, st := range stores {
		names[st.ID] = st.Name
		reach.StoreIDs = append(reach.StoreIDs, st.ID)
	}
	if len(stores) == 0 {
		return "No memory store is readable with this credential: nothing to search.", nil
	}
	hits, err := t.app.Search(ctx, reach, q)
	if err != nil {
		return "", err
	}
	if len(hits) == 0 {
		return fmt.Sprintf("No memory in %d store(s) holds every word of %q.", len(stores), q), nil
	}
	var b strings.Builder
	for _, h := range hits {
		fmt.Fprintf(&b, "- store %s  %s: %s\n", names[h.Memory.StoreID], h.Memory.Path, oneLine(h.Snippet, 160))
	}
	return fmt.Sprintf("%d match(es) for %q, best first (memory_view a path to read it):\n%s", len(hits), q, b.String()), nil
}

// store resolves a store id or name and checks the credential may use it.
func (t *tools) store(ctx context.Context, acc Access, idOrName string, write bool) (storage.MemoryStoreRow, error) {
	if idOrName == "" {
		return storage.MemoryStoreRow{}, errors.New("store is empty: pass a store id or name from memory_list_stores")
	}
	st, err := t.app.Store().GetMemoryStore(ctx, idOrName)
	if errors.Is(err, storage.ErrNotFound) {
		st, err = t.storeNamed(ctx, idOrName)
	}
	if err != nil {
		return st, err
	}
	if err := acc.CheckStore(ctx, st.ID, write); err != nil {
		return st, err
	}
	if write && st.Archived() {
		return st, fmt.Errorf("store %s is archived and read-only: write to another store (memory_list_stores)", st.Name)
	}
	return st, nil
}

// storeNamed finds the one live store named name.
func (t *tools) storeNamed(ctx context.Context, name string) (storage.MemoryStoreRow, error) {
	var found []storage.MemoryStoreRow
	seen := 0
	err := t.eachStore(ctx, func(st storage.MemoryStoreRow) bool {
		seen++
		if st.Name == name {
			found = append(found, st)
		}
		return seen < maxStoreNameMatch
	})
	switch {
	case err != nil:
		return storage.MemoryStoreRow{}, err
	case len(found) == 0:
		return storage.MemoryStoreRow{}, fmt.Errorf("no memory store has the id or name %q: call memory_list_stores for the ones you may use", name)
	case len(found) > 1:
		return storage.MemoryStoreRow{}, fmt.Errorf("%d memory stores are named %q: pass the id instead (memory_list_stores shows them)", len(found), name)
	}
	return found[0], nil
}

// eachStore calls f for each store, newest first, including archived ones,
// until f returns false.
func (t *tools) eachStore(ctx context.Context, f func(storage.MemoryStoreRow) bool) error {
	q := storage.MemoryStoreQuery{Limit: 100, IncludeArchived: true}
	for {
		page, err := t.app.Store().ListMemoryStores(ctx, q)
		if err != nil {
			return err
		}
		for _, st := range page.Items {
			if !f(st) {
				return nil
			}
		}
		if page.Next == "" {
			return nil
		}
		q.Cursor = page.Next
	}
}

// memory reads the memory at path p, with its content.
func (t *tools) memory(ctx context.Context, storeID, p string) (storage.MemoryRow, error) {
	dir := path.Dir(p)
	if dir != "/" {
		dir += "/"
	}
	q := storage.MemoryQuery{StoreID: storeID, Prefix: dir, Depth: 1, Limit: 100}
	for {
		page, err := t.app.Store().ListMemories(ctx, q)
		if err != nil {
			return storage.MemoryRow{}, err
		}
		for _, e := range page.Items {
			if e.Prefix == "" && e.Memory.Path == p {
				return t.app.Store().GetMemory(ctx, storeID, e.Memory.ID)
			}
		}
		if page.Next == "" {
			return storage.MemoryRow{}, storage.ErrNotFound
		}
		q.Cursor = page.Next
	}
}

// cleanPath makes a path absolute ("notes/a.md" is "/notes/a.md"), the
// form memory paths take; the services check the rest.
func cleanPath(p string) (string, error) {
	p = strings.TrimSpace(p)
	if p == "" {
		return "", errors.New("path is empty: give a path such as /notes/todo.md (or / to list the store)")
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return p, nil
}

// numbered renders content with 1-based line numbers, as Claude's memory
// tool shows a file, limited to view_range when it is given.
func numbered(p, content string, viewRange []int) (string, error) {
	lines := strings.Split(strings.TrimSuffix(content, "\n"), "\n")
	first, last := 1, len(lines)
	if len(viewRange) > 0 {
		if len(viewRange) != 2 {
			return "", fmt.Errorf("view_range has %d numbers; give two, [first, last] (last -1 for the end)", len(viewRange))
		}
		first, last = viewRange[0], viewRange[1]
		if last == -1 {
			last = len(lines)
		}
		if first < 1 || first > len(lines) || last < first || last > len(lines) {
			return "", fmt.Errorf("view_range %v is outside the memory's %d lines: give [first, last] within 1..%d", viewRange, len(lines), len(lines))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n", p)
	for i := first; i <= last; i++ {
		fmt.Fprintf(&b, "%6d\t%s\n", i, lines[i-1])
	}
	return b.String(), nil
}

// notFound words a missing memory so the model knows what to do next.
func notFound(err error, p, store string) error {
	if errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("no memory at %s in store %s: memory_view \"/\" lists the store, memory_create writes a new one", p, store)
	}
	return err
}

// writeError words storage's refusals of a write for a model.
func writeError(err error, p string) error {
	var conflict *storage.PathConflictError
	var pre *storage.PreconditionFailedError
	var full *storage.StoreFullError
	var apiErr *api.Error
	switch {
	case errors.As(err, &conflict):
		return fmt.Errorf("%s conflicts with the memory at %s: pick another path, or edit that memory with memory_str_replace", p, conflict.Path)
	case errors.As(err, &pre):
		return errors.New("the memory changed while this edit was made: memory_view it again and redo the edit")
	case errors.As(err, &full):
		return fmt.Errorf("the store holds its limit of %d memories: delete or merge some first", full.Limit)
	case errors.Is(err, storage.ErrStoreArchived):
		return errors.New("the store is archived and read-only: write to another store")
	case errors.As(err, &apiErr):
		return errors.New(apiErr.Message)
	}
	return err
}

// oneLine shortens s to one line of at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}
