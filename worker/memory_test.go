package worker

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testlog"
	"github.com/memstore/memstore/internal/testserver"
	"github.com/memstore/memstore/memsync"
)

// memStore creates a store with memories (path → content).
func (f *fixture) memStore(name string, memories map[string]string) *api.MemoryStore {
	f.t.Helper()
	ctx := context.Background()
	st, err := f.admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: name})
	if err != nil {
		f.t.Fatal(err)
	}
	for p, c := range memories {
		if _, err := f.admin.CreateMemory(ctx, st.ID, api.CreateMemoryRequest{Path: p, Content: c}); err != nil {
			f.t.Fatal(err)
		}
	}
	return st
}

func attach(st *api.MemoryStore, access string) api.SessionResourceParams {
	return api.SessionResourceParams{Type: api.ResourceMemoryStore, MemoryStoreID: st.ID, Access: access}
}

// memories is a store's content on the server: path → content.
func (f *fixture) memories(storeID string) map[string]string {
	f.t.Helper()
	out := map[string]string{}
	for item, err := range f.admin.ListAllMemories(context.Background(), storeID, client.ListMemoriesParams{View: api.ViewFull}) {
		if err != nil {
			f.t.Fatal(err)
		}
		if item.Memory != nil {
			out[item.Memory.Path] = *item.Memory.Content
		}
	}
	return out
}

// versions are a store's versions, oldest first, as "operation path by
// actor-id".
func (f *fixture) versions(storeID string) []string {
	f.t.Helper()
	var out []string
	for v, err := range f.admin.ListAllMemoryVersions(context.Background(), storeID, client.ListMemoryVersionsParams{}) {
		if err != nil {
			f.t.Fatal(err)
		}
		who := v.CreatedBy.Type + ":" + v.CreatedBy.SessionID + v.CreatedBy.APIKeyID
		out = append([]string{v.Operation + " " + *v.Path + " by " + who}, out...)
	}
	return out
}

// memoryConfig is a worker configuration with memory on a fresh mount
// root and the shortest sync interval.
func (f *fixture) memoryConfig(logs *testlog.Buffer) Config {
	cfg := f.config(logs)
	cfg.MountRoot = filepath.Join(f.t.TempDir(), "mnt")
	if err := os.Mkdir(cfg.MountRoot, 0o700); err != nil {
		f.t.Fatal(err)
	}
	cfg.MemorySyncInterval = memsync.MinInterval
	return cfg
}

func emptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("%s still holds %d entries; the worker must remove the folders it created", dir, len(entries))
	}
}

// The whole path of a memory-backed session: the worker mounts both
// stores on a remapped root, the agent reads, writes and edits through the
// advertised /mnt/memory paths, is refused on the read-only store, and the
// session terminates; the server then holds the new versions, attributed
// to the session, and the folders are gone.
func TestScriptedSessionWritesEditsAndIsRefusedOnAReadOnlyStore(t *testing.T) {
	f := newFixture(t, "")
	logs := &testlog.Buffer{}
	cfg := f.memoryConfig(logs)
	notes := f.memStore("Project notes", map[string]string{"/todo.md": "- [ ] write\n- [ ] ship\n", "/about.md": "about\n"})
	book := f.memStore("Team handbook", map[string]string{"/style.md": "short sentences\n"})
	sess := f.session(script(api.ScriptEndTerminate,
		toolCall("read", map[string]any{"file_path": "/mnt/memory/project-notes/todo.md"}),
		toolCall("write", map[string]any{"file_path": "/mnt/memory/project-notes/decisions/d1.md", "content": "use SQLite\n"}),
		toolCall("edit", map[string]any{"file_path": "/mnt/memory/project-notes/todo.md", "old_string": "- [ ] write", "new_string": "- [x] write"}),
		toolCall("read", map[string]any{"file_path": "/mnt/memory/team-handbook/style.md"}),
		toolCall("write", map[string]any{"file_path": "/mnt/memory/team-handbook/style.md", "content": "anything\n"}),
	), attach(notes, api.AccessReadWrite), attach(book, api.AccessReadOnly))

	stop := runWorker(t, f.worker(cfg))
	waitFor(t, "the session to end and its item to stop", func() bool {
		return f.getSession(sess.ID).Status == api.SessionTerminated && f.sessionWork(sess.ID).State == api.WorkStopped
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	got := toolResults(f.events(sess.ID))
	if len(got) != 5 {
		t.Fatalf("results = %+v", got)
	}
	if got[0].text != "- [ ] write\n- [ ] ship\n" || got[3].text != "short sentences\n" {
		t.Errorf("reads = %q, %q: want the mounted memories", got[0].text, got[3].text)
	}
	for i := 0; i < 4; i++ {
		if got[i].isError {
			t.Errorf("call %d failed: %s", i+1, got[i].text)
		}
	}
	if !got[4].isError || !strings.Contains(got[4].text, "read-only") || !strings.Contains(got[4].text, "/mnt/memory/team-handbook") {
		t.Errorf("write to the read-only store = %+v, want a refusal naming the store's mount path", got[4])
	}
	if strings.Contains(got[4].text, cfg.MountRoot) {
		t.Errorf("the refusal reveals the real folder: %s", got[4].text)
	}

	want := map[string]string{"/todo.md": "- [x] write\n- [ ] ship\n", "/about.md": "about\n", "/decisions/d1.md": "use SQLite\n"}
	if m := f.memories(notes.ID); !maps.Equal(m, want) {
		t.Errorf("notes on the server = %q, want %q", m, want)
	}
	if m := f.memories(book.ID); len(m) != 1 || m["/style.md"] != "short sentences\n" {
		t.Errorf("the read-only store changed: %q", m)
	}
	actor := api.SessionActor + ":" + sess.ID
	vs := strings.Join(f.versions(notes.ID), "\n")
	for _, want := range []string{"created /decisions/d1.md by " + actor, "modified /todo.md by " + actor} {
		if !strings.Contains(vs, want) {
			t.Errorf("versions lack %q:\n%s", want, vs)
		}
	}
	if len(f.versions(book.ID)) != 1 {
		t.Errorf("read-only store versions = %v", f.versions(book.ID))
	}
	emptyDir(t, cfg.MountRoot)
	if logs.Line("session memory finished", "clean_end=true") == "" {
		t.Errorf("no end-of-memory log line:\n%s", logs)
	}
}

// sendScript sends a new turn to a session.
func (f *fixture) sendScript(sessionID, text string) {
	f.t.Helper()
	if _, err := f.admin.SendEvents(context.Background(), sessionID, api.UserMessage(text)); err != nil {
		f.t.Fatal(err)
	}
}

// Two sessions attach the same store and run at once, each on its own
// worker and mount root. What one writes reaches the other through the
// server: uploaded by one periodic sync, downloaded by the other's.
func TestTwoSessionsOnTwoMountRootsShareOneStore(t *testing.T) {
	f := newFixture(t, "")
	shared := f.memStore("Shared", map[string]string{"/seed.md": "seed\n"})
	type side struct {
		sess  *api.Session
		cfg   Config
		clock *fakeClock
		done  chan error
	}
	var sides [2]*side
	for i, own := range []string{"one", "two"} {
		s := &side{clock: newFakeClock(), done: make(chan error, 1)}
		s.cfg = f.memoryConfig(&testlog.Buffer{})
		s.cfg.Now, s.cfg.MaxIdle = s.clock.Now, -1
		// The interval's protocol, as the official worker runs it; live
		// sync is TestLiveSyncCarriesAWriteToTheOtherSession's.
		s.cfg.MemorySyncInline = true
		s.sess = f.session(script(api.ScriptEndIdle,
			toolCall("write", map[string]any{"file_path": "/mnt/memory/shared/" + own + ".md", "content": "from " + own + "\n"})),
			attach(shared, api.AccessReadWrite))
		item := f.claim()
		w := f.worker(s.cfg)
		go func() { s.done <- w.RunItem(context.Background(), Item{Work: item}) }()
		sides[i] = s
	}
	// turn runs one more script on both sessions and waits for its results.
	turns := 1
	turn := func(calls ...func(other string) string) {
		t.Helper()
		for i, s := range sides {
			other := []string{"two", "one"}[i]
			var cs []string
			for _, c := range calls {
				cs = append(cs, c(other))
			}
			f.sendScript(s.sess.ID, `{"tool_calls":[`+strings.Join(cs, ",")+`]}`)
		}
		turns++
		for _, s := range sides {
			waitFor(t, "the turn's results", func() bool {
				return lastOfType(f.events(s.sess.ID), api.EventSessionStatusIdle) != nil && countTurns(f.events(s.sess.ID)) == turns
			})
		}
	}
	noop := func(string) string { return `{"name":"bash","input":{"command":"true"}}` }
	readOther := func(other string) string {
		return `{"name":"read","input":{"file_path":"/mnt/memory/shared/` + other + `.md"}}`
	}
	for _, s := range sides {
		waitFor(t, "the first writes", func() bool { return countTurns(f.events(s.sess.ID)) == 1 })
	}
	// Nothing is due yet: the server has only the seed.
	if m := f.memories(shared.ID); len(m) != 1 {
		t.Fatalf("memories before any sync = %q", m)
	}
	for _, s := range sides {
		s.clock.Advance(memsync.MinInterval)
	}
	turn(noop) // each uploads its file after the call
	waitFor(t, "both uploads", func() bool {
		m := f.memories(shared.ID)
		return m["/one.md"] == "from one\n" && m["/two.md"] == "from two\n"
	})
	for _, s := range sides {
		s.clock.Advance(memsync.MinInterval)
	}
	turn(noop)      // each downloads the other's file after the call
	turn(readOther) // and the agent reads it
	for i, s := range sides {
		other := []string{"two", "one"}[i]
		res := toolResults(f.events(s.sess.ID))
		if last := res[len(res)-1]; last.isError || last.text != "from "+other+"\n" {
			t.Errorf("session %d read %+v, want the other session's memory", i+1, last)
		}
	}
	for _, s := range sides {
		f.sendScript(s.sess.ID, `{"tool_calls":[],"end":"terminate"}`)
	}
	for i, s := range sides {
		if err := <-s.done; err != nil {
			t.Fatalf("side %d: %v", i+1, err)
		}
		emptyDir(t, s.cfg.MountRoot)
	}
	vs := strings.Join(f.versions(shared.ID), "\n")
	for i, own := range []string{"one", "two"} {
		if want := "created /" + own + ".md by " + api.SessionActor + ":" + sides[i].sess.ID; !strings.Contains(vs, want) {
			t.Errorf("versions lack %q:\n%s", want, vs)
		}
	}
}

// countTurns counts the turns that ended (idle or terminated).
func countTurns(events []api.Event) int {
	n := 0
	for _, e := range events {
		if e.Type == api.EventSessionStatusIdle || e.Type == api.EventSessionStatusTerminated {
			n++
		}
	}
	return n
}

// An item whose session has stores but whose secret has no sessions token
// fails with the documented log line; nothing is mounted, the item is
// stopped, and the session is left idle with requires_action. With memory
// disabled, the same kind of item runs without its stores.
func TestItemWithoutSessionsTokenFailsWhenItsSessionHasStores(t *testing.T) {
	f := newFixture(t, "")
	logs := &testlog.Buffer{}
	cfg := f.memoryConfig(logs)
	st := f.memStore("Notes", map[string]string{"/a.md": "a\n"})
	sess := f.session(script(api.ScriptEndTerminate, toolCall("read", map[string]any{"file_path": "/mnt/memory/notes/a.md"})), attach(st, api.AccessReadWrite))
	work := f.claim()
	noToken := api.WorkSecret{APIBaseURL: f.srv.URL}.Encode()
	work.Secret = &noToken

	err := f.worker(cfg).RunItem(context.Background(), Item{Work: work})
	if !errors.Is(err, ErrNoSessionsToken) {
		t.Fatalf("RunItem = %v, want ErrNoSessionsToken", err)
	}
	line := logs.Line("work item failed: the session has memory stores but the work secret carries no sessions token")
	for _, part := range []string{"level=ERROR", "work_id=" + work.ID, "session_id=" + sess.ID, st.ID, "fix="} {
		if !strings.Contains(line, part) {
			t.Errorf("log line %q lacks %q", line, part)
		}
	}
	emptyDir(t, cfg.MountRoot)
	if got := toolResults(f.events(sess.ID)); len(got) != 0 {
		t.Errorf("results = %+v: the session must not run without its memory", got)
	}
	if st := f.work(work.ID).State; st != api.WorkStopped {
		t.Errorf("work state %s, want stopped", st)
	}
	s := f.getSession(sess.ID)
	idle := lastOfType(f.events(sess.ID), api.EventSessionStatusIdle)
	if s.Status != api.SessionIdle || idle == nil || idle.StopReason.Type != api.StopRequiresAction {
		t.Fatalf("session %s, last idle %+v: want idle with requires_action", s.Status, idle)
	}

	// An interrupt re-queues the session; with memory disabled on purpose
	// the next item runs without its stores.
	if _, err := f.admin.SendEvents(context.Background(), sess.ID, api.UserInterrupt()); err != nil {
		t.Fatal(err)
	}
	f.sendScript(sess.ID, script(api.ScriptEndTerminate, toolCall("bash", map[string]any{"command": "echo without memory"})))
	cfg.MemorySyncInterval = -1
	again := f.claim()
	again.Secret = &noToken
	if err := f.worker(cfg).RunItem(context.Background(), Item{Work: again}); err != nil {
		t.Fatal(err)
	}
	if got := toolResults(f.events(sess.ID)); len(got) != 1 || strings.TrimSpace(got[0].text) != "without memory" {
		t.Errorf("results = %+v", got)
	}
	if logs.Line("memory disabled by a negative memory sync interval") == "" {
		t.Errorf("no memory-disabled log line:\n%s", logs)
	}
}

// Stores that cannot be mounted (something is already at their folders,
// as a crashed worker leaves them) fail the item and leave what was there
// untouched; the loop goes on and serves the next session. Each refusal
// is one log line an operator can act on alone: the store, the folder to
// look at, the mount path and the fix — not repeated by the lines that
// follow it.
func TestMountFailureFailsTheItemAndTheLoopGoesOn(t *testing.T) {
	f := newFixture(t, "")
	logs := &testlog.Buffer{}
	cfg := f.memoryConfig(logs)
	blocked := f.memStore("Blocked", map[string]string{"/a.md": "a\n"})
	leftover := f.memStore("Leftover", nil)
	squatter := filepath.Join(cfg.MountRoot, "blocked", "mine.txt")
	if err := os.MkdirAll(filepath.Dir(squatter), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(squatter, []byte("not yours"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(cfg.MountRoot, "leftover"), 0o700); err != nil {
		t.Fatal(err)
	}
	first := f.session(script(api.ScriptEndTerminate, toolCall("read", map[string]any{"file_path": "/mnt/memory/blocked/a.md"})),
		attach(blocked, api.AccessReadWrite), attach(leftover, api.AccessReadOnly))
	stop := runWorker(t, f.worker(cfg))
	waitFor(t, "the failed item to stop", func() bool { return f.sessionWork(first.ID).State == api.WorkStopped })
	second := f.session(script(api.ScriptEndTerminate, toolCall("bash", map[string]any{"command": "echo next"})))
	waitFor(t, "the next session", func() bool { return f.getSession(second.ID).Status == api.SessionTerminated })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(squatter); err != nil || string(b) != "not yours" {
		t.Errorf("the squatting file = %q, %v: it must be left as found", b, err)
	}
	if got := toolResults(f.events(first.ID)); len(got) != 0 {
		t.Errorf("the unmounted session ran: %+v", got)
	}
	if s := f.getSession(first.ID); s.Status != api.SessionIdle {
		t.Errorf("first session %s, want idle (requires_action)", s.Status)
	}
	for _, st := range []*api.MemoryStore{blocked, leftover} {
		slug := strings.ToLower(st.Name)
		var refusals []string
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, st.ID+" cannot be mounted at") {
				refusals = append(refusals, line)
			}
		}
		if len(refusals) != 1 {
			t.Errorf("store %s: %d log lines carry its refusal, want exactly one:\n%s", st.Name, len(refusals), strings.Join(refusals, "\n"))
			continue
		}
		for _, part := range []string{"level=ERROR", "work_id=", "session_id=" + first.ID, "memory_store_id=" + st.ID,
			"folder=" + filepath.Join(cfg.MountRoot, slug), "mount_path=/mnt/memory/" + slug, "something already exists there", "remove it"} {
			if !strings.Contains(refusals[0], part) {
				t.Errorf("store %s: refusal %q lacks %q", st.Name, refusals[0], part)
			}
		}
	}
	if logs.Line("work item failed: a memory store could not be mounted", "session_id="+first.ID) == "" {
		t.Errorf("no summary line for the failed item:\n%s", logs)
	}
}

// Shutting down during a long call flushes what the agent wrote (no sync
// was due), stops the item, and removes the folders.
func TestShutdownFlushesMemoryAndStopsTheItem(t *testing.T) {
	f := newFixture(t, "")
	logs := &testlog.Buffer{}
	cfg := f.memoryConfig(logs)
	cfg.Now = newFakeClock().Now // no sync comes due
	cfg.MemorySyncInline = true  // and no write is uploaded at once
	st := f.memStore("Notes", nil)
	sess := f.session(script(api.ScriptEndIdle,
		toolCall("write", map[string]any{"file_path": "/mnt/memory/notes/draft.md", "content": "half-way there\n"}),
		startedMarker("started"),
	), attach(st, api.AccessReadWrite))
	w := f.worker(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.RunItem(ctx, Item{Work: f.claim()}) }()
	waitStarted(t, cfg.Workdir, "started")
	if m := f.memories(st.ID); len(m) != 0 {
		t.Fatalf("a sync ran before it was due: %q", m)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if m := f.memories(st.ID); m["/draft.md"] != "half-way there\n" {
		t.Errorf("after shutdown the server holds %q, want the flushed draft", m)
	}
	if got := toolResults(f.events(sess.ID)); len(got) != 2 || !got[1].isError || !strings.Contains(got[1].text, "shutting down") {
		t.Errorf("results = %+v", got)
	}
	if s := f.sessionWork(sess.ID).State; s != api.WorkStopped {
		t.Errorf("work state %s, want stopped", s)
	}
	emptyDir(t, cfg.MountRoot)
	if logs.Line("session memory finished", "clean_end=false", "flush_changes=1") == "" {
		t.Errorf("no flush log line:\n%s", logs)
	}
}

// A program that quits without waiting for the item to wind down (a
// second Ctrl-C during the flush) first calls Abandon. It logs what that
// loses: one line per item still served, naming it and the folders that
// keep the edits not yet uploaded, which the next session of those stores
// would refuse to mount over. And it kills the item's shell, which would
// otherwise outlive the worker, still running the agent's command. Once
// the item is let go there is nothing to say.
func TestAbandonNamesTheItemAndTheFoldersQuittingLeaves(t *testing.T) {
	f := newFixture(t, "")
	logs := &testlog.Buffer{}
	cfg := f.memoryConfig(logs)
	st := f.memStore("Notes", nil)
	sess := f.session(script(api.ScriptEndIdle,
		toolCall("bash", map[string]any{"command": "echo $$ > shell.pid; touch started; sleep 120", "timeout_ms": 300000})),
		attach(st, api.AccessReadWrite))
	w := f.worker(cfg)
	work := f.claim()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.RunItem(ctx, Item{Work: work}) }()
	waitStarted(t, cfg.Workdir, "started")

	b, err := os.ReadFile(inRoom(t, cfg.Workdir, "shell.pid"))
	if err != nil {
		t.Fatal(err)
	}
	shell, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}

	w.Abandon()
	if err := syscall.Kill(shell, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the agent's shell (pid %d) outlived Abandon: %v", shell, err)
	}
	line := logs.Line("quitting before the work item was let go")
	for _, part := range []string{"level=ERROR", "work_id=" + work.ID, "session_id=" + sess.ID,
		filepath.Join(cfg.MountRoot, "notes"), "not yet uploaded", "adopts them"} {
		if !strings.Contains(line, part) {
			t.Errorf("abandon line %q lacks %q", line, part)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	before := strings.Count(logs.String(), "quitting before")
	w.Abandon()
	if after := strings.Count(logs.String(), "quitting before"); after != before {
		t.Errorf("Abandon after the item was let go logged %d more lines:\n%s", after-before, logs)
	}
}

// Live sync (the default): what one session writes is uploaded at once and
// reaches the other session's folder through the change feed, with no
// clock moving: no periodic sync is involved.
func TestLiveSyncCarriesAWriteToTheOtherSession(t *testing.T) {
	f := newFixture(t, "")
	shared := f.memStore("Shared", nil)
	type side struct {
		sess *api.Session
		cfg  Config
		done chan error
	}
	var sides [2]*side
	for i := range sides {
		s := &side{done: make(chan error, 1)}
		s.cfg = f.memoryConfig(&testlog.Buffer{})
		s.cfg.Now, s.cfg.MaxIdle = newFakeClock().Now, -1
		s.sess = f.session(script(api.ScriptEndIdle, toolCall("bash", map[string]any{"command": "true"})), attach(shared, api.AccessReadWrite))
		w := f.worker(s.cfg)
		item := f.claim()
		go func() { s.done <- w.RunItem(context.Background(), Item{Work: item}) }()
		sides[i] = s
	}
	for _, s := range sides {
		waitFor(t, "the first turn", func() bool { return countTurns(f.events(s.sess.ID)) == 1 })
	}
	f.sendScript(sides[0].sess.ID, `{"tool_calls":[{"name":"write","input":{"file_path":"/mnt/memory/shared/live.md","content":"written live\n"}}]}`)
	waitFor(t, "the write in the other session's folder", func() bool {
		b, err := os.ReadFile(filepath.Join(sides[1].cfg.MountRoot, "shared", "live.md"))
		return err == nil && string(b) == "written live\n"
	})
	f.sendScript(sides[1].sess.ID, `{"tool_calls":[{"name":"read","input":{"file_path":"/mnt/memory/shared/live.md"}}]}`)
	waitFor(t, "the read", func() bool { return countTurns(f.events(sides[1].sess.ID)) == 2 })
	if res := toolResults(f.events(sides[1].sess.ID)); res[len(res)-1].isError || !strings.Contains(res[len(res)-1].text, "written live") {
		t.Fatalf("the other session read %+v", res[len(res)-1])
	}
	if n := len(f.versions(shared.ID)); n != 1 {
		t.Fatalf("%d versions, want the one write uploaded once", n)
	}
	for _, s := range sides {
		f.sendScript(s.sess.ID, `{"tool_calls":[],"end":"terminate"}`)
	}
	for i, s := range sides {
		if err := <-s.done; err != nil {
			t.Fatalf("side %d: %v", i+1, err)
		}
	}
}

// Live sync against a server without memstore's extensions (the hosted
// API's shape): nothing is uploaded at the write (write-through needs the
// change feed's view of the server), and the periodic sync, queued after a
// call once the interval has passed, uploads it from the background.
func TestLiveSyncFallsBackWithoutTheExtensions(t *testing.T) {
	f := newFixture(t, "")
	f.srv.Wrap(testserver.WithoutExtensions)
	st := f.memStore("Notes", nil)
	cfg := f.memoryConfig(&testlog.Buffer{})
	clock := newFakeClock()
	cfg.Now, cfg.MaxIdle = clock.Now, -1
	sess := f.session(script(api.ScriptEndIdle,
		toolCall("write", map[string]any{"file_path": "/mnt/memory/notes/draft.md", "content": "draft\n"})),
		attach(st, api.AccessReadWrite))
	w := f.worker(cfg)
	done := make(chan error, 1)
	go func() { done <- w.RunItem(context.Background(), Item{Work: f.claim()}) }()
	waitFor(t, "the first turn", func() bool { return countTurns(f.events(sess.ID)) == 1 })
	if m := f.memories(st.ID); len(m) != 0 {
		t.Fatalf("uploaded without the change feed before any sync: %q", m)
	}
	clock.Advance(memsync.MinInterval)
	f.sendScript(sess.ID, `{"tool_calls":[{"name":"bash","input":{"command":"true"}}]}`)
	waitFor(t, "the periodic sync's upload", func() bool { return f.memories(st.ID)["/draft.md"] == "draft\n" })
	f.sendScript(sess.ID, `{"tool_calls":[],"end":"terminate"}`)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
