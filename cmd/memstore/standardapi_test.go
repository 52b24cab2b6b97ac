package main

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testlog"
)

// hostedAPIProxy is a reverse proxy that makes a memstore server look like
// Anthropic's API to whoever calls it: memstore's own endpoints (SPEC §8 and
// beyond: the change feed, the snapshot, search, MCP, the console, health
// and metrics) answer 404 as unknown routes do there, and no response
// carries the Memstore-Extensions header. It records every request and the
// ones it refused.
type hostedAPIProxy struct {
	mu       sync.Mutex
	seen     []string // "METHOD path" of every request
	refused  []string // the extension requests answered 404
	upstream *httputil.ReverseProxy
}

func newHostedAPIProxy(t *testing.T, target string) (*httptest.Server, *hostedAPIProxy) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &hostedAPIProxy{upstream: httputil.NewSingleHostReverseProxy(u)}
	p.upstream.FlushInterval = -1 // the event stream and the long poll flow through as they come
	p.upstream.ModifyResponse = func(r *http.Response) error {
		r.Header.Del(api.ExtensionsHeader)
		return nil
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		if t.Failed() {
			p.mu.Lock()
			defer p.mu.Unlock()
			t.Logf("requests through the proxy:\n%s", strings.Join(p.seen, "\n"))
		}
	})
	return srv, p
}

// memstoreOnly reports whether a path is one of memstore's own endpoints,
// which Anthropic's API does not have.
func memstoreOnly(path string) bool {
	if rest, ok := strings.CutPrefix(path, "/v1/memory_stores/"); ok {
		parts := strings.Split(rest, "/")
		return len(parts) == 2 && (parts[1] == "changes" || parts[1] == "snapshot" || parts[1] == "search")
	}
	return path == "/mcp" || path == "/healthz" || path == "/metrics" || strings.HasPrefix(path, "/console")
}

func (p *hostedAPIProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	line := r.Method + " " + r.URL.Path
	p.mu.Lock()
	p.seen = append(p.seen, line)
	if memstoreOnly(r.URL.Path) {
		p.refused = append(p.refused, line)
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"type":"error","error":{"type":"not_found_error","message":"Not found"}}`))
		return
	}
	p.mu.Unlock()
	p.upstream.ServeHTTP(w, r)
}

func (p *hostedAPIProxy) records() (seen, refused []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen), slices.Clone(p.refused)
}

// The worker's standard-API path, end to end, through a proxy that hides
// memstore's extensions as Anthropic's API lacks them: a real `memstore
// worker poll` claims the session, mounts its store from the plain memory
// listing, reads, writes and edits with the file tools and with bash,
// syncs (periodically and at the end), and tears down. The server then
// holds every change, attributed to the session; the folders are gone; and
// the only extension request tried is the mount's snapshot, whose 404
// sends it to the plain listing.
func TestWorkerServesASessionThroughTheStandardAPIOnly(t *testing.T) {
	bin := memstoreBinary(t)
	s := newWorkerSetup(t)
	proxy, records := newHostedAPIProxy(t, s.rs.baseURL)
	ctx := context.Background()
	store, err := s.admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	for p, c := range map[string]string{"/plan.md": "step one\n", "/old.md": "to be edited by bash\n"} {
		if _, err := s.admin.CreateMemory(ctx, store.ID, api.CreateMemoryRequest{Path: p, Content: c}); err != nil {
			t.Fatal(err)
		}
	}
	workdir, mountRoot := t.TempDir(), t.TempDir()
	dir := filepath.Join(mountRoot, "notes") // unsandboxed, bash finds the store here
	sess := s.session(t, `{"tool_calls":[`+
		`{"name":"read","input":{"file_path":"/mnt/memory/notes/plan.md"}},`+
		`{"name":"write","input":{"file_path":"/mnt/memory/notes/draft.md","content":"a draft\n"}},`+
		`{"name":"edit","input":{"file_path":"/mnt/memory/notes/plan.md","old_string":"one","new_string":"two"}},`+
		`{"name":"bash","input":{"command":"echo from bash > `+dir+`/bash.md && sed -i s/bash/sed/ `+dir+`/old.md && cat `+dir+`/draft.md"}},`+
		`{"name":"bash","input":{"command":"sleep 5.5"}},`+
		`{"name":"bash","input":{"command":"true"}}],"end":"terminate"}`,
		api.SessionResourceParams{Type: api.ResourceMemoryStore, MemoryStoreID: store.ID, Access: api.AccessReadWrite})

	var out testlog.Buffer
	cmd := exec.Command(bin, "worker", "poll", "--mount-root", mountRoot, "--sandbox", "none", "--memory-sync-interval", "5s")
	cmd.Env = append(s.workerEnv(workdir), "ANTHROPIC_BASE_URL="+proxy.URL)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// The worker logs the stop once the server has answered it, which a
	// busy host may let the test see first.
	waitWithin(t, 60*time.Second, "the session to end and its item to stop", func() bool {
		return s.work(t, sess.ID).State == api.WorkStopped && strings.Contains(out.String(), "work item stopped")
	})

	texts, errs := s.results(t, sess.ID)
	if len(texts) != 6 || slices.Contains(errs, true) || !strings.Contains(texts[0], "step one") || texts[3] != "a draft\n" {
		t.Fatalf("results = %q (errors %v)\n%s", texts, errs, out.String())
	}
	got := map[string]string{}
	list, err := s.admin.ListMemories(ctx, store.ID, client.ListMemoriesParams{View: api.ViewFull})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range list.Data {
		got[it.Memory.Path] = *it.Memory.Content
	}
	want := map[string]string{"/plan.md": "step two\n", "/draft.md": "a draft\n", "/bash.md": "from bash\n", "/old.md": "to be edited by sed\n"}
	if !maps.Equal(got, want) {
		t.Errorf("store after the session = %q, want %q", got, want)
	}
	for v, err := range s.admin.ListAllMemoryVersions(ctx, store.ID, client.ListMemoryVersionsParams{}) {
		if err != nil {
			t.Fatal(err)
		}
		if v.Operation != "created" || !(*v.Path == "/plan.md" || *v.Path == "/old.md") {
			if v.CreatedBy.SessionID != sess.ID {
				t.Errorf("version %s of %s is attributed to %+v, want the session", v.Operation, *v.Path, v.CreatedBy)
			}
		}
	}
	if entries, _ := os.ReadDir(mountRoot); len(entries) != 0 {
		t.Errorf("the mount root still holds %d entries", len(entries))
	}
	if entries, _ := os.ReadDir(workdir); len(entries) != 0 {
		t.Errorf("the workdir still holds %d entries", len(entries))
	}

	seen, refused := records.records()
	// The mount tries the snapshot once (a 404 costs one request where it
	// saves a listing's pages); nothing else of memstore's is asked for,
	// the change feed above all, which only a response's header offers.
	if want := []string{"GET /v1/memory_stores/" + store.ID + "/snapshot"}; !slices.Equal(refused, want) {
		t.Errorf("extension requests the proxy refused = %q, want only the mount's snapshot attempt %q", refused, want)
	}
	for _, want := range []string{
		"GET /v1/environments/" + s.env.ID + "/work/poll",
		"POST /v1/environments/" + s.env.ID + "/work/",
		"GET /v1/sessions/" + sess.ID + "/events/stream",
		"GET /v1/memory_stores/" + store.ID + "/memories",
		"POST /v1/memory_stores/" + store.ID + "/memories",
	} {
		if !slices.ContainsFunc(seen, func(s string) bool { return strings.HasPrefix(s, want) }) {
			t.Errorf("no request through the proxy starts with %q", want)
		}
	}
	for _, line := range []string{"work item claimed", "session memory finished", "work item stopped"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("the worker's output lacks %q:\n%s", line, out.String())
		}
	}
}
