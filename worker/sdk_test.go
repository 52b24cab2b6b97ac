package worker

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/testlog"
)

// serverState is what a session left on a server: every store's memories,
// its versions as (operation, path, who) in a stable order, and the
// session's end.
type serverState struct {
	memories map[string]map[string]string // store name → path → content
	versions map[string][]string          // store name → "operation path by actor type"
	status   string
	errors   []bool // is_error of each tool result, in order
}

// runScenario sets up two stores and a session on a fresh server whose
// sessions mount under a temporary folder, lets serve run a worker on it
// until the item is stopped, and returns the server's state.
func runScenario(t *testing.T, serve func(f *fixture)) serverState {
	t.Helper()
	// The mount folders' parent exists, as SPEC §5 requires of the host
	// (the SDK worker would create it; memstore's refuses to guess).
	prefix := t.TempDir()
	f := newFixture(t, prefix)
	notes := f.memStore("Notes", map[string]string{"/todo.md": "- [ ] write\n", "/old.md": "stale\n", "/keep/deep.md": "deep\n"})
	book := f.memStore("Book", map[string]string{"/style.md": "short\n"})
	dir := prefix + "/notes"
	sess := f.session(script(api.ScriptEndTerminate,
		toolCall("read", map[string]any{"file_path": dir + "/todo.md"}),
		toolCall("write", map[string]any{"file_path": dir + "/new/idea.md", "content": "an idea\n"}),
		toolCall("edit", map[string]any{"file_path": dir + "/todo.md", "old_string": "- [ ]", "new_string": "- [x]"}),
		toolCall("write", map[string]any{"file_path": prefix + "/book/style.md", "content": "long\n"}),
		toolCall("bash", map[string]any{"command": fmt.Sprintf("printf 'from bash\\n' > %s/bash.md && rm %s/old.md", dir, dir)}),
		toolCall("glob", map[string]any{"pattern": "**/*.md", "path": dir}),
	), attach(notes, api.AccessReadWrite), attach(book, api.AccessReadOnly))

	serve(f)

	st := serverState{memories: map[string]map[string]string{}, versions: map[string][]string{}, status: f.getSession(sess.ID).Status}
	for name, s := range map[string]*api.MemoryStore{"Notes": notes, "Book": book} {
		st.memories[name] = f.memories(s.ID)
		var vs []string
		for _, v := range f.versions(s.ID) {
			// Actor ids differ between the two servers; their kind must not.
			vs = append(vs, strings.Split(v, ":")[0])
		}
		slices.Sort(vs)
		st.versions[name] = vs
	}
	for _, r := range toolResults(f.events(sess.ID)) {
		st.errors = append(st.errors, r.isError)
	}
	if w := f.sessionWork(sess.ID); w.State != api.WorkStopped {
		t.Errorf("work item %s is %s after the run, want stopped", w.ID, w.State)
	}
	return st
}

// The same scripted session, served once by memstore's worker and once by
// the official SDK's EnvironmentWorker, leaves the server in the same
// state: the same memories with the same content, the same kinds of
// versions by the same kinds of writers, and the same session end.
func TestSameStateAsTheOfficialSDKWorker(t *testing.T) {
	ours := runScenario(t, func(f *fixture) {
		cfg := f.config(&testlog.Buffer{})
		cfg.MemorySyncInterval = 5 * time.Second
		stop := runWorker(t, f.worker(cfg))
		waitForStopped(t, f)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
	theirs := runScenario(t, func(f *fixture) {
		c := anthropic.NewClient(option.WithBaseURL(f.srv.URL), option.WithAPIKey("replaced-by-the-worker"))
		maxIdle := time.Minute
		w := environments.NewEnvironmentWorker(c, environments.EnvironmentWorkerOptions{
			EnvironmentID: f.env.ID, EnvironmentKey: f.key, Workdir: t.TempDir(), WorkerID: "sdk-worker",
			MemorySyncInterval: 5 * time.Second, MaxIdle: &maxIdle, Logger: slog.New(slog.DiscardHandler),
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		waitForStopped(t, f)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})

	if ours.status != api.SessionTerminated || theirs.status != api.SessionTerminated {
		t.Errorf("session status: ours %s, SDK %s; want both terminated", ours.status, theirs.status)
	}
	if !slices.Equal(ours.errors, theirs.errors) || !slices.Equal(ours.errors, []bool{false, false, false, true, false, false}) {
		t.Errorf("tool result errors: ours %v, SDK %v; want only the read-only write refused", ours.errors, theirs.errors)
	}
	for _, store := range []string{"Notes", "Book"} {
		if !maps.Equal(ours.memories[store], theirs.memories[store]) {
			t.Errorf("%s memories differ:\n ours %q\n SDK  %q", store, ours.memories[store], theirs.memories[store])
		}
		if !slices.Equal(ours.versions[store], theirs.versions[store]) {
			t.Errorf("%s versions differ:\n ours %q\n SDK  %q", store, ours.versions[store], theirs.versions[store])
		}
	}
	want := map[string]string{"/todo.md": "- [x] write\n", "/keep/deep.md": "deep\n", "/new/idea.md": "an idea\n", "/bash.md": "from bash\n"}
	if !maps.Equal(ours.memories["Notes"], want) {
		t.Errorf("Notes = %q, want %q", ours.memories["Notes"], want)
	}
}

// waitForStopped waits until the fixture's only session has terminated
// and its item stopped.
func waitForStopped(t *testing.T, f *fixture) {
	t.Helper()
	waitFor(t, "the session's item to stop", func() bool {
		for w, err := range f.admin.ListAllWork(context.Background(), f.env.ID, api.WorkListParams{}) {
			if err != nil || w.State != api.WorkStopped {
				return false
			}
		}
		return true
	})
}
