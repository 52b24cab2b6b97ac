package memsync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"unsafe"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/confined"
)

// outcome counts what one sync step did for one store.
type outcome struct {
	changes int // files written or removed, memories created, updated or deleted
	failed  int // changes that failed, each logged; the next sync retries
	cutOff  int // changes not made because the context ended
	// cutPaths and failedPaths are the paths of the changes cut off and
	// failed, for a caller that must tell the operator which edits were
	// lost.
	cutPaths, failedPaths []string
	// incomplete: the context ended before the changes could be planned.
	incomplete bool
	// conflicts are local edits the server won (another writer changed
	// the memory too).
	conflicts int
	// uploaded and downloaded are the content bytes moved.
	uploaded, downloaded int64
}

// applier carries out a plan's actions for one store, re-checking each file
// just before it is overwritten or deleted, and advances next (the plan's
// Next) only for what succeeded.
type applier struct {
	st *store
	// contents, when set, holds the memories of a full listing by id, so
	// downloads take their content from it instead of fetching each one.
	contents map[string]api.Memory
	// fill, when set, writes downloads into a folder a mount is filling
	// for the first time (see confined.Filler): each file goes straight to
	// its name.
	fill *confined.Filler

	mu   sync.Mutex
	next State
	out  outcome
	// own are the server changes this applier made, for the store's copy
	// of the listing (see remoteCache.apply).
	own []api.MemoryChange
}

func (st *store) newApplier(next State) *applier { return &applier{st: st, next: next} }

// result is the fate of one action.
type result uint8

const (
	done    result = iota // the change was made
	skipped               // nothing to do any more (the file or memory changed since the plan); the next sync decides
	failed                // logged; the next sync retries
	cutOff                // the context ended first
)

// apply runs the I/O actions in an order that frees paths before they are
// reused: local removals, then server deletes (a memory /a must go before
// /a/b can be created), then uploads, then downloads.
func (a *applier) apply(ctx context.Context, actions []Action) {
	a.run(ctx, filterKinds(actions, RemoveLocal), a.removeLocal)
	a.run(ctx, filterKinds(actions, DeleteRemote), a.deleteRemote)
	a.run(ctx, filterKinds(actions, Create, Update), a.upload)
	a.run(ctx, filterKinds(actions, Download), a.download)
	// The change feed brings these too, but only at the next sync's read
	// of it: an upload before that (an edit right after the write that
	// created the file) must see the memory the write created, or it
	// creates it again and takes its own memory for another writer's.
	if a.st.feed.on {
		a.st.feed.apply(a.own)
	}
}

// learn records a change this applier made on the server.
func (a *applier) learn(ch api.MemoryChange) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.own = append(a.own, ch)
}

// filterKinds returns the actions of the given kinds, in order.
func filterKinds(actions []Action, kinds ...Kind) []Action {
	var out []Action
	for _, act := range actions {
		if slices.Contains(kinds, act.Kind) {
			out = append(out, act)
		}
	}
	return out
}

// run does fn for each action, requestConcurrency at a time. Once ctx has
// ended the remaining actions are counted as cut off, not started.
func (a *applier) run(ctx context.Context, acts []Action, fn func(context.Context, Action) result) {
	sem := make(chan struct{}, requestConcurrency)
	var wg sync.WaitGroup
	for _, act := range acts {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			a.count(act, cutOff)
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			a.count(act, fn(ctx, act))
		})
	}
	wg.Wait()
}

func (a *applier) count(act Action, r result) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch r {
	case done:
		a.out.changes++
	case failed:
		a.out.failed++
		a.out.failedPaths = append(a.out.failedPaths, act.Path)
	case cutOff:
		a.out.cutOff++
		a.out.cutPaths = append(a.out.cutPaths, act.Path)
	}
}

// tally adds to the outcome's conflicts and byte counts.
func (a *applier) tally(conflicts int, uploaded, downloaded int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.out.conflicts += conflicts
	a.out.uploaded += uploaded
	a.out.downloaded += downloaded
}

// mark advances the state under the applier's lock.
func (a *applier) mark(f func(State)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f(a.next)
}

// failure classifies an error that stopped an action: cut off if the
// context ended, else logged (once while it repeats) and failed.
func (a *applier) failure(ctx context.Context, act Action, msg string, err error) result {
	if ctx.Err() != nil {
		return cutOff
	}
	a.st.warn(ctx, act.Path, msg, err)
	return failed
}

func (a *applier) debug(ctx context.Context, act Action, msg string, args ...any) {
	a.st.log.DebugContext(ctx, msg, append([]any{"path", act.Path}, args...)...)
}

// stream downloads acts with the content of a full listing instead of one
// GET each: the way to fetch a whole store. A memory planned but absent from
// the listing was deleted or renamed since the plan; the next sync sees it.
func (a *applier) stream(ctx context.Context, acts []Action) error {
	if len(acts) == 0 {
		return nil
	}
	want := map[string]Action{}
	for _, act := range acts {
		want[act.MemoryID] = act
	}
	err := a.st.eachFullPage(ctx, func(page []api.Memory) {
		a.contents = map[string]api.Memory{}
		var batch []Action
		for _, m := range page {
			if act, ok := want[m.ID]; ok {
				delete(want, m.ID)
				a.contents[m.ID] = m
				batch = append(batch, act)
			}
		}
		a.run(ctx, batch, a.download)
	})
	a.contents = nil
	if err != nil {
		r := failed
		if ctx.Err() != nil {
			r = cutOff
		}
		for _, act := range want {
			a.count(act, r)
		}
	}
	return err
}

// download writes the server's content of act.MemoryID to the file, if the
// file still is what the plan saw (act.Local). The content may be newer
// than the listing the plan came from; its own sha is what gets marked.
func (a *applier) download(ctx context.Context, act Action) result {
	var m api.Memory
	if a.contents != nil {
		var ok bool
		if m, ok = a.contents[act.MemoryID]; !ok {
			return skipped
		}
	} else {
		got, err := a.st.client.GetMemory(ctx, a.st.id, act.MemoryID, client.GetMemoryParams{View: api.ViewFull})
		if client.IsStatus(err, http.StatusNotFound) {
			a.debug(ctx, act, "the memory was deleted after the listing; the next sync catches up")
			return skipped
		}
		if err != nil {
			return a.failure(ctx, act, "cannot download this memory; the next sync retries", err)
		}
		m = *got
	}
	if m.Path != act.Path {
		a.debug(ctx, act, "the memory was renamed after the listing; the next sync catches up", "new_path", m.Path)
		return skipped
	}
	if m.Content == nil {
		return a.failure(ctx, act, "the server sent this memory without its content; the next sync retries", nil)
	}
	content := readOnlyBytes(*m.Content)
	sum := sha256Hex(content)
	if sum != m.ContentSHA256 {
		return a.failure(ctx, act, "the server sent content that does not match its content_sha256, so it was not written; the next sync retries",
			fmt.Errorf("content hashes to %s, content_sha256 is %s", sum, m.ContentSHA256))
	}
	if act.Keep {
		where, err := a.st.keepCopy(act.Path, act.Local.SHA256)
		if errors.Is(err, confined.ErrChanged) {
			a.debug(ctx, act, "the file changed after the scan, so the download did not overwrite it; the next sync decides", "error", err)
			return skipped
		}
		if err != nil {
			return a.failure(ctx, act, "cannot keep a copy of this file's local edit, so the server version was not written over it; the next sync retries", err)
		}
		a.st.log.WarnContext(ctx, "the server version of this memory overwrote the file; the agent's losing edit is kept at kept_copy (restore it by hand if it matters)",
			"path", act.Path, "kept_copy", where)
		a.tally(1, 0, 0)
	}
	var err error
	if a.fill != nil && act.Local.Absent && !act.Keep {
		err = a.fill.Create(relPath(act.Path), content)
	} else {
		err = a.st.root.WriteFile(relPath(act.Path), content, act.Local)
	}
	if errors.Is(err, confined.ErrChanged) || act.Base != "" && localChange(err) {
		if act.Base != "" {
			a.mark(func(s State) { s.MarkSynced(act.Path, act.Base) })
		}
		a.debug(ctx, act, "the file changed after the scan, so the download did not overwrite it; the next sync decides", "error", err)
		return skipped
	}
	if err != nil {
		return a.failure(ctx, act, "cannot write this memory into the folder; the next sync retries", err)
	}
	a.st.placed.Store(true)
	a.st.fault("downloaded")
	// m.ContentSHA256 equals sum and the remote listing holds it already:
	// the state shares it instead of keeping a copy per file.
	a.mark(func(s State) { s.MarkSynced(act.Path, m.ContentSHA256) })
	a.tally(0, 0, int64(len(content)))
	a.debug(ctx, act, "downloaded")
	return done
}

// localChange reports a write refused because the folder's shape changed
// at the path since the scan: a file where a folder should be, a folder
// holding files, or a symlink, in place of the file or of a folder above it.
func localChange(err error) bool {
	return errors.Is(err, confined.ErrNotDirectory) || errors.Is(err, confined.ErrNotRegular) || errors.Is(err, confined.ErrSymlink)
}

// upload sends the file as an update of act.MemoryID (guarded by the
// server content the plan saw) or as a new memory, if its bytes still hash
// to what the plan saw.
func (a *applier) upload(ctx context.Context, act Action) result {
	data, err := a.st.root.ReadFile(relPath(act.Path), api.MaxContentBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, confined.ErrTooLarge):
		a.debug(ctx, act, "the file changed after the scan; the next sync decides", "error", err)
		return skipped
	case err != nil:
		return a.failure(ctx, act, "cannot read this file to upload it; the next sync retries", err)
	}
	sum := sha256Hex(data)
	if sum != act.Local.SHA256 {
		a.debug(ctx, act, "the file changed after the scan; the next sync uploads the new content")
		return skipped
	}
	// Recorded before sending: if the response is lost, the next listing
	// recognises the upload as ours (no duplicate, no false conflict).
	a.mark(func(s State) { s.MarkSent(act.Path, sum) })
	content := string(data)
	var m *api.Memory
	create := act.Kind == Create
	if !create {
		m, err = a.st.client.UpdateMemory(ctx, a.st.id, act.MemoryID, api.UpdateMemoryRequest{
			Content:      &content,
			Precondition: &api.Precondition{Type: "content_sha256", ContentSHA256: act.RemoteSHA},
		})
		switch {
		case client.IsStatus(err, http.StatusNotFound):
			a.debug(ctx, act, "the memory was deleted on the server after the listing; creating it again from the file")
			create = true
		case client.IsStatus(err, http.StatusConflict) && !refused(err):
			// The sent record stays: if a lost response hid our own
			// success (and a retry then met its own precondition), the
			// next listing recognises it.
			a.st.log.InfoContext(ctx, "the memory changed on the server after the listing, so the local edit was not uploaded; the server version wins and the next sync downloads it",
				"path", act.Path)
			a.tally(1, 0, 0)
			return skipped
		}
	}
	if create {
		m, err = a.st.client.CreateMemory(ctx, a.st.id, api.CreateMemoryRequest{Path: act.Path, Content: content})
		if client.IsStatus(err, http.StatusConflict) && !refused(err) {
			a.st.emit(ctx, createConflict(act.Path, err))
			a.tally(1, 0, 0)
			return skipped
		}
	}
	if refused(err) {
		a.mark(func(s State) { s.MarkRefused(act.Path, sum) })
		a.st.log.WarnContext(ctx, "the server refused this file's content; it stays in the folder and is not sent again until it changes", "path", act.Path, "error", err)
		return failed
	}
	if err != nil {
		return a.failure(ctx, act, "the upload of this file failed or got no answer; the next sync checks whether it landed and sends it again if not", err)
	}
	a.st.fault("uploaded")
	a.learn(api.MemoryChange{MemoryID: m.ID, Operation: api.OperationModified, Path: &m.Path, ContentSHA256: &m.ContentSHA256})
	a.mark(func(s State) { s.MarkSynced(act.Path, m.ContentSHA256) })
	a.tally(0, int64(len(data)), 0)
	a.debug(ctx, act, "uploaded", "memory_id", m.ID)
	return done
}

// createConflict is the note for a create that met a memory in its way. At
// the path itself, another writer won the race, and the next sync
// downloads its memory. At a folder of the path, or under it (a file /a
// against a memory /a/b), the two cannot coexist in a folder, and neither
// side gives way without losing an edit: a person has to rename one.
func createConflict(path string, err error) Note {
	var ae *api.Error
	if !errors.As(err, &ae) || ae.ConflictingPath == "" || ae.ConflictingPath == path {
		return Note{Level: slog.LevelInfo, Path: path, Persistent: true, Err: err,
			Msg: "another writer created a memory at this path first, so the file was not uploaded; the server version wins and the next sync downloads it"}
	}
	return Note{Level: slog.LevelWarn, Path: path, Persistent: true, Err: err,
		Msg: fmt.Sprintf("this file cannot be uploaded: the memory %s is in its way (a path cannot be both a file and a folder), so the file stays in the folder, unsynced, "+
			"and a copy of it is kept beside the folder when the session ends; rename the file, or delete or rename that memory, to sync it", ae.ConflictingPath)}
}

// refused reports an answer that no retry of the same content can change:
// a 400 (invalid, or the store is full) or a 413, and a plain
// conflict_error 409 — the store is archived, hence read-only. The 409s of
// a lost race carry their own types (memory_precondition_failed_error,
// memory_path_conflict_error) and are not refusals: another writer won,
// and the next sync downloads its version.
func refused(err error) bool {
	return client.IsStatus(err, http.StatusBadRequest) || client.IsStatus(err, http.StatusRequestEntityTooLarge) ||
		client.IsType(err, api.Conflict)
}

// deleteRemote deletes act.MemoryID on the server because its file stayed
// deleted, after checking once more that the file is still gone and that
// the folder is still the store's (a folder destroyed since the scan must
// not drive deletions).
func (a *applier) deleteRemote(ctx context.Context, act Action) result {
	if readMarker(a.st.root, a.st.id) != MarkerTrusted {
		a.debug(ctx, act, "the folder's marker changed after the scan, so the memory was not deleted")
		return skipped
	}
	if gone, err := fileGone(a.st.root, relPath(act.Path)); !gone {
		a.debug(ctx, act, "the file is back, so the memory was not deleted", "error", err)
		return skipped
	}
	a.mark(func(s State) { s.MarkDeleteSent(act.Path) })
	_, err := a.st.client.DeleteMemory(ctx, a.st.id, act.MemoryID, client.DeleteMemoryParams{ExpectedContentSHA256: act.RemoteSHA})
	switch {
	case err == nil, client.IsStatus(err, http.StatusNotFound):
		a.learn(api.MemoryChange{MemoryID: act.MemoryID, Operation: api.OperationDeleted})
		a.mark(func(s State) { s.MarkGone(act.Path) })
		a.st.log.InfoContext(ctx, "deleted the memory on the server: its file stayed deleted from the folder (its versions remain on the server)",
			"path", act.Path, "memory_id", act.MemoryID)
		return done
	case client.IsStatus(err, http.StatusConflict):
		a.st.log.InfoContext(ctx, "the memory changed on the server after the listing, so it was not deleted; the next sync restores its file",
			"path", act.Path)
		a.tally(1, 0, 0)
		return skipped
	}
	return a.failure(ctx, act, "cannot delete this memory on the server; the next sync retries", err)
}

// fileGone reports whether no file is at rel: nothing is there, or a folder
// took its place, or a file took the place of one of its folders. The last
// two are how an agent turns a memory /a into /a/b, or /d/x into /d, and
// the new memory can only be created once the old one is deleted. Anything
// else — a file, a symlink, a folder on the way that cannot be read — may
// be or hide the file, and the answer is no, with the error if there was
// one.
func fileGone(root *confined.Root, rel string) (bool, error) {
	fi, err := root.Lstat(rel)
	switch {
	case err == nil:
		return fi.Mode.IsDir(), nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, confined.ErrNotDirectory):
		return true, nil
	}
	return false, err
}

// removeLocal removes the file of a memory deleted on the server, unless it
// was edited since the scan (the edit survives and is re-created on the
// server by the next sync).
func (a *applier) removeLocal(ctx context.Context, act Action) result {
	err := a.st.root.RemoveFile(relPath(act.Path), act.Local, true)
	switch {
	case err == nil, errors.Is(err, fs.ErrNotExist):
		a.st.placed.Store(true)
		a.st.fault("removed")
		a.mark(func(s State) { s.MarkGone(act.Path) })
		a.debug(ctx, act, "removed the file: its memory was deleted on the server")
		return done
	case errors.Is(err, confined.ErrChanged):
		a.debug(ctx, act, "the file changed after the scan, so it was kept; the next sync uploads it", "error", err)
		return skipped
	}
	return a.failure(ctx, act, "cannot remove this file, whose memory was deleted on the server; the next sync retries", err)
}

// readOnlyBytes is s's bytes without a copy, for hashing and writing
// only: a store's mount passes all its content through here, and a copy
// made garbage of the whole store's size.
func readOnlyBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
