package console

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/secret"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storearchive"
)

// maxImportBytes caps an import upload and what its archives unpack to.
const maxImportBytes = 64 << 20

func (c *Console) exportStore(w http.ResponseWriter, r *http.Request, q *request) error {
	s, err := c.loadStore(r)
	if err != nil {
		return err
	}
	format := r.URL.Query().Get("format")
	if format == "" {
		format = storearchive.TarGz
	}
	if format != storearchive.TarGz && format != storearchive.Zip {
		return badRequest("format %q: choose tar.gz or zip", format)
	}
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", s.ID+"."+format))
	w.Header().Set("Content-Type", "application/octet-stream")
	aw, err := storearchive.NewWriter(w, format, c.now())
	if err != nil {
		return err
	}
	query := storage.MemoryQuery{StoreID: s.ID, Prefix: "/", Limit: api.MaxListLimit, WithContent: true}
	for {
		page, err := c.store.ListMemories(r.Context(), query)
		if err != nil {
			// The archive has begun: cutting it short is all that is left.
			c.log.ErrorContext(r.Context(), "console export failed midway; the download is incomplete", "memory_store_id", s.ID, "error", err)
			return nil
		}
		for _, it := range page.Items {
			if err := aw.Add(it.Memory.Path, derefString(it.Memory.Content)); err != nil {
				return nil
			}
		}
		if page.Next == "" {
			break
		}
		query.Cursor = page.Next
	}
	if err := aw.Close(); err != nil {
		c.log.ErrorContext(r.Context(), "console export could not be finished", "memory_store_id", s.ID, "error", err)
	}
	c.log.InfoContext(r.Context(), "memory store exported", "memory_store_id", s.ID, "format", format, "user_id", q.User.ID)
	return nil
}

type importView struct {
	Store   storage.MemoryStoreRow
	Steps   []storearchive.Step
	Upload  string
	Applied bool
	Counts  map[string]int
}

// importStore previews an upload (archives or single files) against the
// store, or applies a preview the person has seen.
func (c *Console) importStore(w http.ResponseWriter, r *http.Request, q *request) error {
	s, err := c.loadStore(r)
	if err != nil {
		return err
	}
	if upload := r.PostFormValue("upload"); upload != "" {
		pending, ok, err := c.imports.take(c.now(), upload, s.ID, q.User.ID)
		if err != nil {
			return err
		}
		if !ok {
			return badRequest("this import preview has expired (a preview is kept for %v, and each person's %d newest); upload the files again", importPreviewTTL, maxPreviewsPerUser)
		}
		steps := c.applyImport(r, q, s, pending.steps)
		c.log.InfoContext(r.Context(), "memory store imported", "memory_store_id", s.ID, "files", len(steps), "user_id", q.User.ID)
		return c.render(w, r, q, http.StatusOK, "import", "Imported into "+s.Name, importView{Store: s, Steps: steps, Applied: true, Counts: countSteps(steps)})
	}
	release, err := c.imports.admit(r.Context())
	if err != nil {
		return err
	}
	defer release()
	if err := r.ParseMultipartForm(8 << 20); err != nil {
		return badRequest("the upload could not be read (%v); uploads are limited to %d MiB", err, maxImportBytes>>20)
	}
	var files []storearchive.File
	var steps []storearchive.Step
	for _, fh := range r.MultipartForm.File["files"] {
		f, err := fh.Open()
		if err != nil {
			return err
		}
		data, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return err
		}
		format := storearchive.FormatOf(fh.Filename)
		if format == "" {
			files = append(files, storearchive.File{Path: "/" + fh.Filename, Content: data})
			continue
		}
		got, skipped, err := storearchive.Read(format, data, api.MaxContentBytes, maxImportBytes)
		if err != nil {
			return badRequest("%s: %v", fh.Filename, err)
		}
		files = append(files, got...)
		for _, sk := range skipped {
			steps = append(steps, storearchive.Step{Path: sk.Name, Action: storearchive.Refuse, Reason: sk.Reason})
		}
	}
	if len(files) == 0 && len(steps) == 0 {
		return badRequest("choose one or more files, or a .tar.gz or .zip archive, to import")
	}
	planned, err := c.planImport(r, s, files)
	if err != nil {
		return err
	}
	steps = append(steps, planned...)
	id := secret.New("")
	if err := c.imports.put(c.now(), id, pendingImport{storeID: s.ID, userID: q.User.ID, steps: steps}); err != nil {
		return err
	}
	return c.render(w, r, q, http.StatusOK, "import", "Import into "+s.Name, importView{Store: s, Steps: steps, Upload: id, Counts: countSteps(steps)})
}

// planImport decides each file's fate with the API's validators against
// the store as it is now.
func (c *Console) planImport(r *http.Request, s storage.MemoryStoreRow, files []storearchive.File) ([]storearchive.Step, error) {
	existing := map[string]storearchive.Existing{}
	query := storage.MemoryQuery{StoreID: s.ID, Prefix: "/", Limit: api.MaxListLimit}
	for {
		page, err := c.store.ListMemories(r.Context(), query)
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			existing[it.Memory.Path] = storearchive.Existing{ID: it.Memory.ID, SHA256: it.Memory.ContentSHA256}
		}
		if page.Next == "" {
			break
		}
		query.Cursor = page.Next
	}
	steps := storearchive.Plan(files, existing, checkMemory)
	if s.Archived() {
		for i, st := range steps {
			if st.Action == storearchive.Create || st.Action == storearchive.Change {
				steps[i].Action, steps[i].Reason = storearchive.Refuse, "the store is archived (read-only)"
			}
		}
	}
	return steps, nil
}

// checkMemory is the API's check of a memory's path and content, worded
// for the preview.
func checkMemory(path, content string) error {
	if err := app.CheckMemory(path, content); err != nil {
		return errors.New(explain(err))
	}
	return nil
}

// applyImport carries out a preview. A change is made only if the memory
// is still as the preview saw it; whatever the storage rules refuse
// (a path taken meanwhile, a full store) is reported, not fatal.
func (c *Console) applyImport(r *http.Request, q *request, s storage.MemoryStoreRow, steps []storearchive.Step) []storearchive.Step {
	out := make([]storearchive.Step, len(steps))
	for i, st := range steps {
		var err error
		switch st.Action {
		case storearchive.Create:
			_, err = c.app.Memories.Create(r.Context(), s.ID, st.Path, st.Content, q.Caller())
			st.Reason = "created"
		case storearchive.Change:
			_, _, err = c.app.Memories.Update(r.Context(), s.ID, st.Memory.ID, app.MemoryChange{Content: &st.Content, Expect: app.Expect{Field: "content_sha256", SHA256: st.Memory.SHA256}}, q.Caller())
			st.Reason = "changed"
		}
		if err != nil {
			msg := storageRefusal(err)
			if msg == "" {
				c.log.ErrorContext(r.Context(), "console import of a file failed", "memory_store_id", s.ID, "path", st.Path, "error", err)
				msg = "the server failed to store it (see its log)"
			}
			var stale *storage.PreconditionFailedError
			if errors.As(err, &stale) {
				msg = "someone changed this memory after the preview; it was left as they wrote it"
			}
			st.Action, st.Reason = storearchive.Refuse, msg
		}
		out[i] = st
	}
	return out
}

func countSteps(steps []storearchive.Step) map[string]int {
	n := map[string]int{}
	for _, st := range steps {
		n[st.Action]++
	}
	return n
}
