package memsync_test

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testlog"
	"github.com/memstore/memstore/memsync"
)

// The property tests of reconcile_test.go and property_test.go run Reconcile
// against a model of apply. These run the real thing: a Session on a real
// folder against the real server, with the agent's edits and another
// writer's interleaved at random — also between a sync's scan and its
// actions, which is when apply's re-checks matter — and responses lost on the
// way back. The paths nest (/a and /a/b), so an agent can turn a file into a
// folder and back.

var modelPaths = []string{"/a", "/a/b", "/c/d", "/c/e", "/f"}

var modelContents = []string{"", "x", "y", "zz"}

// model is one store under test: its own store on the shared server, one
// mounted Session, and the other writer.
type model struct {
	t *rapid.T
	e *env
	m *mount
	// mid, when set, is run once during the next sync, around its listing:
	// just before it is sent (after the scan, so the listing sees a
	// server change but the scan missed a local one), or, with midAfter,
	// once its answer is in (after the plan's inputs, before its actions).
	// (Set before Sync and cleared after it returns, so the store's
	// goroutine reads them safely.)
	mid      func()
	midAfter bool
	// cut drops the response of every write the next sync sends, after
	// the server applied it.
	cut bool
}

func newModel(t *rapid.T, shared *env, root string) *model {
	st, err := shared.admin.CreateMemoryStore(shared.ctx, api.CreateMemoryStoreRequest{Name: "model"})
	if err != nil {
		t.Fatal(err)
	}
	e := *shared
	e.storeID, e.logs = st.ID, &testlog.Buffer{}
	md := &model{t: t, e: &e}
	for _, p := range modelPaths {
		if rapid.Bool().Draw(t, "initial "+p) {
			md.remoteWrite(p, rapid.SampledFrom(modelContents).Draw(t, "initial content "+p))
		}
	}
	md.m = e.mount(root)
	md.m.rec.before = func(r *http.Request) error {
		md.duringListing(r, false)
		return nil
	}
	md.m.rec.cut = func(r *http.Request) bool {
		md.duringListing(r, true)
		return md.cut && r.Method != http.MethodGet
	}
	return md
}

// duringListing runs the pending mid-sync edit at its moment of the sync's
// listing, the one request every sync sends between its scan and its
// actions.
func (md *model) duringListing(r *http.Request, answered bool) {
	listing := r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/memories") && r.URL.Query().Get("view") == string(api.ViewBasic)
	if f := md.mid; f != nil && listing && md.midAfter == answered {
		md.mid = nil // once: a retried listing is the same sync
		f()
	}
}

// localWrite is the agent writing a file with its shell. A path the folder's
// shape does not allow (a file where a folder is needed, or the reverse)
// fails for the agent too, and changes nothing.
func (md *model) localWrite(p, c string) {
	full := filepath.Join(md.m.dir, filepath.FromSlash(p))
	if os.MkdirAll(filepath.Dir(full), 0o700) != nil {
		return
	}
	_ = os.WriteFile(full, []byte(c), 0o600)
}

// localDelete is the agent's rm -rf.
func (md *model) localDelete(p string) {
	_ = os.RemoveAll(filepath.Join(md.m.dir, filepath.FromSlash(p)))
}

// remoteWrite is another writer creating or updating a memory; a path
// conflict is that writer's refusal and changes nothing.
func (md *model) remoteWrite(p, c string) {
	e := md.e
	var err error
	if m := md.find(p); m != nil {
		_, err = e.admin.UpdateMemory(e.ctx, e.storeID, m.ID, api.UpdateMemoryRequest{Content: &c})
	} else {
		_, err = e.admin.CreateMemory(e.ctx, e.storeID, api.CreateMemoryRequest{Path: p, Content: c})
	}
	if err != nil && !client.IsStatus(err, http.StatusConflict) {
		md.t.Fatalf("another writer's write of %s: %v", p, err)
	}
}

func (md *model) remoteDelete(p string) {
	e := md.e
	if m := md.find(p); m != nil {
		if _, err := e.admin.DeleteMemory(e.ctx, e.storeID, m.ID, client.DeleteMemoryParams{}); err != nil {
			md.t.Fatalf("another writer's delete of %s: %v", p, err)
		}
	}
}

func (md *model) find(p string) *api.Memory {
	for it, err := range md.e.admin.ListAllMemories(md.e.ctx, md.e.storeID, client.ListMemoriesParams{View: api.ViewFull}) {
		if err != nil {
			md.t.Fatal(err)
		}
		if it.Memory != nil && it.Memory.Path == p {
			return it.Memory
		}
	}
	return nil
}

func (md *model) server() map[string]string {
	out := map[string]string{}
	for it, err := range md.e.admin.ListAllMemories(md.e.ctx, md.e.storeID, client.ListMemoriesParams{View: api.ViewFull}) {
		if err != nil {
			md.t.Fatal(err)
		}
		if m := it.Memory; m != nil {
			out[m.Path] = *m.Content
		}
	}
	return out
}

// folder is the agent's view: every regular file but the marker.
func (md *model) folder() map[string]string {
	out := map[string]string{}
	err := filepath.WalkDir(md.m.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(md.m.dir, p)
		if rel == memsync.MarkerName {
			return nil
		}
		if !d.Type().IsRegular() {
			md.t.Fatalf("the sync left %s, which is not a regular file", rel)
		}
		b, err := os.ReadFile(p)
		out["/"+filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		md.t.Fatal(err)
	}
	return out
}

// edit draws one edit by the agent or, when remote, by either writer, as a
// function to run now or in the middle of a sync.
func (md *model) edit(remote bool) func() {
	p := rapid.SampledFrom(modelPaths).Draw(md.t, "path")
	ops := []string{"local write", "local write", "local delete"}
	if remote {
		ops = append(ops, "remote write", "remote delete")
	}
	op := rapid.SampledFrom(ops).Draw(md.t, "op")
	c := rapid.SampledFrom(modelContents).Draw(md.t, "content")
	return func() {
		switch op {
		case "local write":
			md.localWrite(p, c)
		case "local delete":
			md.localDelete(p)
		case "remote write":
			md.remoteWrite(p, c)
		case "remote delete":
			md.remoteDelete(p)
		}
	}
}

// step runs one random event: an edit, a sync (maybe with an edit during
// it, maybe losing its responses), or time passing.
func (md *model) step(remote bool) {
	switch rapid.SampledFrom([]string{"edit", "edit", "sync", "tick"}).Draw(md.t, "step") {
	case "edit":
		md.edit(remote)()
	case "sync":
		if rapid.Bool().Draw(md.t, "edit during the sync") {
			md.mid = md.edit(remote)
			md.midAfter = rapid.Bool().Draw(md.t, "edit after the listing")
		}
		md.cut = rapid.IntRange(0, 3).Draw(md.t, "lose responses") == 0
		md.m.Sync(md.e.ctx)
		md.mid, md.cut = nil, false
	case "tick":
		md.e.clock.Advance(time.Duration(rapid.IntRange(0, 40).Draw(md.t, "seconds")) * time.Second)
	}
}

// modelEnv is one server for every run of a property: each run gets its own
// store and its own mount root on it.
func modelEnv(t *testing.T) (*env, func() string) {
	e := newEnv(t)
	base := t.TempDir()
	n := 0
	return e, func() string {
		n++
		dir := filepath.Join(base, strconv.Itoa(n))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		return dir
	}
}

// TestModelAgentEditsReachTheServer: with the agent as the only writer, every
// edit it made — files written, deleted, turned into folders, also while a
// sync was running, and with responses lost — is on the server once the
// session ends cleanly. (An agent that leaves the folder empty at the end
// has it rebuilt instead, by the rule for wiped folders; such a run proves
// nothing here.)
func TestModelAgentEditsReachTheServer(t *testing.T) {
	t.Parallel()
	e, newRoot := modelEnv(t)
	rapid.Check(t, func(rt *rapid.T) {
		md := newModel(rt, e, newRoot())
		for range rapid.IntRange(0, 30).Draw(rt, "steps") {
			md.step(false)
		}
		agent := md.folder()
		rep := md.m.End(context.Background(), true)
		got := md.server()
		if len(agent) == 0 && strings.Contains(md.e.logs.String(), "rebuilding the folder") {
			return
		}
		if !maps.Equal(got, agent) {
			rt.Fatalf("server %v\nwant the agent's folder %v\nend report %+v\nlog:\n%s", got, agent, rep, md.e.logs)
		}
	})
}

// TestModelFolderAndServerConverge: whatever both writers did, once they
// stop, syncs past the corroboration window make the folder and the server
// hold the same memories.
func TestModelFolderAndServerConverge(t *testing.T) {
	t.Parallel()
	e, newRoot := modelEnv(t)
	rapid.Check(t, func(rt *rapid.T) {
		md := newModel(rt, e, newRoot())
		defer md.m.End(context.Background(), true)
		for range rapid.IntRange(0, 30).Draw(rt, "steps") {
			md.step(true)
		}
		for range 4 {
			md.e.clock.Advance(memsync.DefaultCorroborationWindow + time.Second)
			md.m.Sync(md.e.ctx)
		}
		got, want := md.folder(), md.server()
		if shapeConflict(got, want) {
			// A file on one side where the other has a folder of the same
			// name: neither can give way without losing an edit, so both
			// stay, with a warning, until someone renames one.
			return
		}
		if !maps.Equal(got, want) {
			rt.Fatalf("folder %v\nserver %v\nlog:\n%s", got, want, md.e.logs)
		}
	})
}

// shapeConflict reports whether a path is a file on one side and a folder
// on the other.
func shapeConflict(a, b map[string]string) bool {
	under := func(files map[string]string, dir string) bool {
		for p := range files {
			if strings.HasPrefix(p, dir+"/") {
				return true
			}
		}
		return false
	}
	for p := range a {
		if under(b, p) {
			return true
		}
	}
	for p := range b {
		if under(a, p) {
			return true
		}
	}
	return false
}
