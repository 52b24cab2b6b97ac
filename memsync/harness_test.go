package memsync_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/confined"
	"github.com/memstore/memstore/internal/testclock"
	"github.com/memstore/memstore/internal/testlog"
	"github.com/memstore/memstore/internal/testserver"
	"github.com/memstore/memstore/memsync"
)

// recorder is the sessions' HTTP transport: it forwards to the real test
// server, records every request, and lets a test cut a connection after the
// server has answered (the response is read and thrown away, as when a
// connection drops on the way back).
type recorder struct {
	mu   sync.Mutex
	reqs []string
	// before, when set, is called before a request is forwarded; an
	// error fails the request without the server seeing it.
	before func(*http.Request) error
	// cut, when set, is asked about each request after the server
	// answered it; true drops the response.
	cut func(*http.Request) bool
	// answered, when set, is given each response body the server sent.
	answered func(req *http.Request, body []byte)
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req.Method+" "+req.URL.Path)
	cut, before, answered := r.cut, r.before, r.answered
	r.mu.Unlock()
	if before != nil {
		if err := before(req); err != nil {
			return nil, err
		}
	}
	res, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && answered != nil {
		body, rerr := io.ReadAll(res.Body)
		res.Body.Close()
		if rerr != nil {
			return nil, rerr
		}
		answered(req, body)
		res.Body = io.NopCloser(bytes.NewReader(body))
	}
	if err == nil && cut != nil && cut(req) {
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return nil, errors.New("read: connection reset by peer (cut by the test)")
	}
	return res, err
}

// take returns the requests recorded since the last call.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reqs
	r.reqs = nil
	return out
}

// env is a real memstore server (internal/testserver) on a clock stopped
// at a fixed time, one store, and an admin client that plays "another
// writer". newEnv's server has the hosted API's shape (no change feed, no
// snapshot), so every sync test proves the fallback to the hosted API's
// protocol; newFeedEnv's offers memstore's extensions.
type env struct {
	t       testing.TB
	ctx     context.Context
	clock   *testclock.Clock // the injected time of the server and of every session
	srv     *testserver.Server
	admin   *client.Client
	storeID string
	logs    *testlog.Buffer
}

// instant retries like the worker does, without waiting.
var instant = client.RetryPolicy{MaxRetries: 2, Sleep: func(context.Context, time.Duration) error { return nil }}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := newFeedEnv(t)
	e.srv.Wrap(testserver.WithoutExtensions)
	return e
}

func newFeedEnv(t testing.TB) *env {
	t.Helper()
	return newFeedEnvWith(t, testserver.Options{})
}

// newFeedEnvWith is newFeedEnv on a server started with o (its clock is the
// env's).
func newFeedEnvWith(t testing.TB, o testserver.Options) *env {
	t.Helper()
	clk := testclock.New(time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC))
	o.Now = clk.Now
	srv := testserver.Start(t, o)
	admin := srv.Client(t, client.WithAPIKey(srv.AdminKey), client.WithRetryPolicy(instant))
	st, err := admin.CreateMemoryStore(t.Context(), api.CreateMemoryStoreRequest{Name: "Notes"})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: t.Context(), clock: clk, srv: srv, admin: admin, storeID: st.ID, logs: &testlog.Buffer{}}
	// Every test that syncs also checks that no store's folder moved
	// between phases its lifecycle does not allow.
	t.Cleanup(func() {
		if bugs := e.logs.Records(t, slog.LevelError, "memsync bug"); len(bugs) > 0 {
			t.Errorf("a store moved between phases its lifecycle does not allow: %v", bugs)
		}
	})
	return e
}

// sessionClient is a client for a session's sync, with the admin key (the
// server's scopes are tested elsewhere) and rt as its transport.
func (e *env) sessionClient(rt http.RoundTripper) *client.Client {
	e.t.Helper()
	return e.srv.Client(e.t, client.WithAPIKey(e.srv.AdminKey), client.WithRetryPolicy(instant), client.WithHTTPClient(&http.Client{Transport: rt}))
}

// put writes a memory as another writer would: created, or updated without
// a precondition.
func (e *env) put(path, content string) {
	e.t.Helper()
	if m := e.find(path); m != nil {
		if _, err := e.admin.UpdateMemory(e.ctx, e.storeID, m.ID, api.UpdateMemoryRequest{Content: &content}); err != nil {
			e.t.Fatal(err)
		}
		return
	}
	if _, err := e.admin.CreateMemory(e.ctx, e.storeID, api.CreateMemoryRequest{Path: path, Content: content}); err != nil {
		e.t.Fatal(err)
	}
}

// remove deletes a memory as another writer would.
func (e *env) remove(path string) {
	e.t.Helper()
	m := e.find(path)
	if m == nil {
		e.t.Fatalf("no memory at %s", path)
	}
	if _, err := e.admin.DeleteMemory(e.ctx, e.storeID, m.ID, client.DeleteMemoryParams{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) find(path string) *api.Memory {
	e.t.Helper()
	for it, err := range e.admin.ListAllMemories(e.ctx, e.storeID, client.ListMemoriesParams{View: api.ViewFull}) {
		if err != nil {
			e.t.Fatal(err)
		}
		if it.Memory != nil && it.Memory.Path == path {
			return it.Memory
		}
	}
	return nil
}

// server returns the store's memories, path → content.
func (e *env) server() map[string]string {
	e.t.Helper()
	out := map[string]string{}
	for it, err := range e.admin.ListAllMemories(e.ctx, e.storeID, client.ListMemoriesParams{View: api.ViewFull}) {
		if err != nil {
			e.t.Fatal(err)
		}
		if m := it.Memory; m != nil {
			if _, dup := out[m.Path]; dup {
				e.t.Fatalf("the server lists %s twice", m.Path)
			}
			out[m.Path] = *m.Content
		}
	}
	return out
}

// versions counts the versions of every memory ever at path, deleted ones
// included.
func (e *env) versions() int {
	e.t.Helper()
	n := 0
	for _, err := range e.admin.ListAllMemoryVersions(e.ctx, e.storeID, client.ListMemoryVersionsParams{}) {
		if err != nil {
			e.t.Fatal(err)
		}
		n++
	}
	return n
}

// mount is one session's view of the store.
type mount struct {
	*memsync.Session
	dir   string
	rec   *recorder
	stats func() client.Stats
}

type mountOption func(*memsync.SessionConfig, *memsync.StoreMount)

func readOnly(_ *memsync.SessionConfig, m *memsync.StoreMount) { m.ReadOnly = true }

func endTimeout(d time.Duration) mountOption {
	return func(c *memsync.SessionConfig, _ *memsync.StoreMount) { c.EndTimeout = d }
}

func interval(d time.Duration) mountOption {
	return func(c *memsync.SessionConfig, _ *memsync.StoreMount) { c.Interval = d }
}

// caseInsensitive makes the session believe its folders' filesystem
// ignores letter case.
func caseInsensitive(c *memsync.SessionConfig, _ *memsync.StoreMount) {
	c.ProbeCase = func(*confined.Root) (bool, error) { return true, nil }
}

// reports collects the session's sync reports into *got.
func reports(mu *sync.Mutex, got *[]memsync.SyncReport) mountOption {
	return func(c *memsync.SessionConfig, _ *memsync.StoreMount) {
		c.OnSync = func(r memsync.SyncReport) {
			mu.Lock()
			defer mu.Unlock()
			*got = append(*got, r)
		}
	}
}

// noWatch turns the folder's watch off: what a test writes without Wrote
// (as bash does) then waits for the next periodic sync.
func noWatch(c *memsync.SessionConfig, _ *memsync.StoreMount) { c.WatchQuiet = -1 }

func deletions(d memsync.DeletionMode) mountOption {
	return func(c *memsync.SessionConfig, _ *memsync.StoreMount) { c.Deletions = d }
}

// session makes a Session for the env's store under the mount root root,
// without mounting it.
func (e *env) session(root string, opts ...mountOption) *mount {
	e.t.Helper()
	rec := &recorder{}
	c := e.sessionClient(rec)
	sm := memsync.StoreMount{MemoryStoreID: e.storeID, Name: "Notes", MountPath: "/mnt/memory/notes", Dir: filepath.Join(root, "notes")}
	cfg := memsync.SessionConfig{
		Client: c,
		Now:    e.clock.Now,
		Logger: e.logs.JSON(),
	}
	for _, o := range opts {
		o(&cfg, &sm)
	}
	cfg.Stores = []memsync.StoreMount{sm}
	s, err := memsync.NewSession(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return &mount{Session: s, dir: sm.Dir, rec: rec, stats: c.Stats}
}

// mount makes a Session under root and mounts it.
func (e *env) mount(root string, opts ...mountOption) *mount {
	e.t.Helper()
	m := e.session(root, opts...)
	if err := m.Mount(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	m.rec.take()
	return m
}

// folder returns the regular files under dir (marker excluded), path →
// content, and fails on anything else but folders: a sync must never leave
// a symlink or a temporary file behind.
func folder(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			t.Fatalf("%s is not a regular file (%v)", p, d.Type())
		case rel == memsync.MarkerName:
			return nil
		}
		b, err := os.ReadFile(p)
		out["/"+filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func writeFile(t testing.TB, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func removeFile(t testing.TB, dir, rel string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, rel)); err != nil {
		t.Fatal(err)
	}
}

func equal(t testing.TB, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
	}
}

// writes filters requests that change something on the server.
func writes(reqs []string) []string {
	var out []string
	for _, r := range reqs {
		if !strings.HasPrefix(r, "GET ") {
			out = append(out, r)
		}
	}
	return out
}

// fill adds n memories of 200 B to 2 KB, the size of typical notes, spread
// over ten folders, with a few writers at once.
func fill(t testing.TB, e *env, n int) {
	t.Helper()
	jobs := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range 8 {
		wg.Go(func() {
			for i := range jobs {
				content := fmt.Sprintf("note %d\n%s", i, strings.Repeat("memory text ", 16+i%150))
				if _, err := e.admin.CreateMemory(e.ctx, e.storeID, api.CreateMemoryRequest{Path: fmt.Sprintf("/topic-%d/note-%04d.md", i%10, i), Content: content}); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
