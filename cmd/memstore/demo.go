package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/workercli"
	"github.com/memstore/memstore/memsync"
	"github.com/memstore/memstore/sandbox"
	"github.com/memstore/memstore/worker"
)

func newDemoCommand(s streams) *cobra.Command {
	var keep, verbose bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "see it work: a server, a worker and a scripted agent session, in a temporary folder",
		Example: `  memstore demo
  memstore demo --keep -v`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), keep, verbose, s.stdout, s.stderr)
		},
	}
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temporary folder (database and working directory) to look at afterwards")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "also print the server's and the worker's logs (to stderr)")
	return cmd
}

// The demo's scenario: two stores, one the agent may change and one it may
// only read, and a scripted session that reads, writes, edits, is refused
// on the read-only store, and terminates.
const (
	demoNotes = "Project notes"
	demoBook  = "Team handbook"
)

var demoMemories = map[string][][2]string{
	demoNotes: {
		{"/README.md", "Notes the agent keeps about the project.\n"},
		{"/todo.md", "- [ ] write the demo\n- [ ] ship v1\n"},
		{"/decisions/2026-01-storage.md", "Memories live in SQLite; one file per memory.\n"},
	},
	demoBook: {
		{"/style.md", "Write short sentences.\n"},
	},
}

// demoCall is one call of the demo script, with how the demo describes it.
type demoCall struct {
	what  string
	name  string
	input map[string]any
	// refused: the call must fail (the read-only store).
	refused bool
	// tick: after this call the demo moves the sync clock past the sync
	// interval, so that a periodic sync runs then, not 5 s later.
	tick bool
	// sandboxed: the call works only in the sandbox, which shows the
	// stores at their mount paths; without one, bash sees the host's
	// /mnt/memory, and the call must fail.
	sandboxed bool
}

const demoDecision = "The worker runs in the same process as the server in `memstore up`.\n"

var demoCalls = []demoCall{
	{what: "read the to-do list", name: "read", input: map[string]any{"file_path": "/mnt/memory/project-notes/todo.md"}},
	{what: "read the team's style guide (read-only store)", name: "read", input: map[string]any{"file_path": "/mnt/memory/team-handbook/style.md"}},
	{what: "write a new memory", name: "write", input: map[string]any{"file_path": "/mnt/memory/project-notes/decisions/2026-05-up.md", "content": demoDecision}, tick: true},
	{what: "run a shell command", name: "bash", input: map[string]any{"command": `echo "the shell runs in $(basename "$PWD")"`}},
	{what: "read the style guide with bash, at its mount path", name: "bash", input: map[string]any{"command": "cat /mnt/memory/team-handbook/style.md"}, sandboxed: true},
	{what: "tick a to-do item", name: "edit", input: map[string]any{"file_path": "/mnt/memory/project-notes/todo.md", "old_string": "- [ ] write the demo", "new_string": "- [x] write the demo"}},
	{what: "try to change the read-only style guide", name: "write", input: map[string]any{"file_path": "/mnt/memory/team-handbook/style.md", "content": "Anything goes.\n"}, refused: true},
	{what: "list the project notes", name: "glob", input: map[string]any{"pattern": "**/*.md", "path": "/mnt/memory/project-notes"}},
}

func runDemo(ctx context.Context, keep, verbose bool, stdout, stderr io.Writer) error {
	tmp, err := os.MkdirTemp("", "memstore-demo-")
	if err != nil {
		return fmt.Errorf("create a temporary folder: %w", err)
	}
	if keep {
		defer fmt.Fprintf(stdout, "\nThe demo's files are kept in %s\n", tmp)
	} else {
		defer os.RemoveAll(tmp)
		workercli.OnForceQuit(ctx, func() { fmt.Fprintf(stderr, "memstore demo: its temporary folder %s is left behind; remove it\n", tmp) })
	}
	raw := slog.New(slog.DiscardHandler)
	if verbose {
		raw = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	d := &demo{out: stdout, tmp: tmp, names: map[string]string{}, done: make(chan struct{})}
	failed, err := d.run(ctx, raw)
	if err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("demo FAILED: %d of the checks above did not hold", failed)
	}
	fmt.Fprintln(stdout, "\ndemo OK: the agent read, wrote and edited memories, was refused on the read-only store, and the server holds every version with who wrote it.")
	fmt.Fprintln(stdout, "Next: 'memstore up' runs a server and a worker for real (see the README).")
	return nil
}

// demo is one run of the scenario and what it saw.
type demo struct {
	out   io.Writer
	tmp   string
	admin *client.Client
	env   *api.Environment
	sess  *api.Session
	// stores by name, and names by store id (for the sync log lines).
	stores map[string]*api.MemoryStore
	names  map[string]string

	mu    sync.Mutex // guards out while the worker logs
	calls int
	// sandbox is the mode the session's bash ran in, from its log line.
	sandbox string
	skew    atomic.Int64  // how far the sync clock is ahead of the wall clock
	done    chan struct{} // closed when the worker let go of the item
	once    sync.Once
}

func (d *demo) printf(format string, a ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, format, a...)
}

// run plays the scenario and checks the outcome; failed counts the checks
// that did not hold, err is what kept the demo from running at all.
func (d *demo) run(ctx context.Context, raw *slog.Logger) (failed int, err error) {
	rs, err := startServer(ctx, serveOptions{addr: "127.0.0.1:0", dataDir: filepath.Join(d.tmp, "data")}, raw, io.Discard)
	if err != nil {
		return 0, err
	}
	defer rs.shutdown()
	if err := d.play(ctx, rs, raw); err != nil {
		return 0, err
	}
	return d.check(ctx), nil
}

// play sets the scene up and runs the worker until it lets go of the
// session's item.
func (d *demo) play(ctx context.Context, rs *runningServer, raw *slog.Logger) error {
	var err error
	d.printf("memstore demo: a server, a worker and one scripted agent session, all in %s\n\n", d.tmp)
	d.printf("Server   %s (SQLite in %s)\n", rs.baseURL, filepath.Join(d.tmp, "data"))
	if d.admin, err = client.New(rs.baseURL, client.WithAPIKey(rs.adminKey)); err != nil {
		return err
	}
	if err := d.setup(ctx); err != nil {
		return fmt.Errorf("demo setup: %w", err)
	}
	key, err := d.admin.CreateEnvironmentKey(ctx, d.env.ID, api.CreateEnvironmentKeyRequest{Name: "demo worker"})
	if err != nil {
		return fmt.Errorf("demo setup: %w", err)
	}

	mountRoot := filepath.Join(d.tmp, "mnt")
	workdir := filepath.Join(d.tmp, "workdir")
	for _, dir := range []string{mountRoot, workdir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	c, err := client.New(rs.baseURL)
	if err != nil {
		return err
	}
	w, err := worker.New(worker.Config{
		Client: c, EnvironmentID: d.env.ID, EnvironmentKey: key.Key, WorkerID: "demo-worker",
		Workdir: workdir, MountRoot: mountRoot, MemorySyncInterval: memsync.MinInterval,
		// The demo's scripted agent is this machine's own: the host's
		// network is meant.
		Sandbox: sandbox.Config{Mode: sandbox.Auto, Network: sandbox.Host},
		// The demo narrates the interval's sync after a call, step by
		// step, which needs the syncs in line with the calls.
		MemorySyncInline: true,
		Now:              func() time.Time { return time.Now().Add(time.Duration(d.skew.Load())) },
		Logger:           slog.New(&demoHandler{d: d, raw: raw.Handler()}),
	})
	if err != nil {
		return err
	}
	d.printf("\nWorker   polls environment %s; mounts /mnt/memory/… under %s\n", d.env.ID, mountRoot)
	d.printf("         syncs every %v (the shortest interval); the demo moves its clock to show one\n\n", memsync.MinInterval)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	select {
	case <-d.done:
	case err := <-ran:
		return fmt.Errorf("the worker stopped early: %v", err)
	case <-time.After(2 * time.Minute):
		return errors.New("demo FAILED: the session did not finish within 2 minutes (run with -v to see the logs)")
	case <-ctx.Done():
		return ctx.Err()
	}
	stop()
	return <-ran
}

// setup creates the environment, the agent, the stores and their memories,
// and the session.
func (d *demo) setup(ctx context.Context) error {
	var err error
	if d.env, err = d.admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "demo"}); err != nil {
		return err
	}
	agent, err := d.admin.CreateAgent(ctx, api.CreateAgentRequest{Name: "demo agent", Model: api.ModelConfig{ID: api.ScriptedModel}})
	if err != nil {
		return err
	}
	d.printf("Setup    environment %s, a worker key, agent %s (model %q)\n", d.env.ID, agent.ID, api.ScriptedModel)
	d.stores = map[string]*api.MemoryStore{}
	var resources []api.SessionResourceParams
	for _, name := range []string{demoNotes, demoBook} {
		st, err := d.admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: name})
		if err != nil {
			return err
		}
		d.stores[name], d.names[st.ID] = st, name
		var paths []string
		for _, m := range demoMemories[name] {
			if _, err := d.admin.CreateMemory(ctx, st.ID, api.CreateMemoryRequest{Path: m[0], Content: m[1]}); err != nil {
				return err
			}
			paths = append(paths, m[0])
		}
		access := api.AccessReadWrite
		if name == demoBook {
			access = api.AccessReadOnly
		}
		resources = append(resources, api.SessionResourceParams{Type: api.ResourceMemoryStore, MemoryStoreID: st.ID, Access: access})
		d.printf("         store %-15q %s  %s  %s\n", name, st.ID, access, strings.Join(paths, " "))
	}
	calls := make([]api.ScriptedToolCall, len(demoCalls))
	for i, c := range demoCalls {
		in, _ := json.Marshal(c.input)
		calls[i] = api.ScriptedToolCall{Name: c.name, Input: in}
	}
	script, _ := json.Marshal(api.ScriptedScript{ToolCalls: calls, End: api.ScriptEndTerminate})
	title := "memstore demo"
	d.sess, err = d.admin.CreateSession(ctx, api.CreateSessionRequest{
		Agent: api.AgentRef{ID: agent.ID}, EnvironmentID: d.env.ID, Title: &title,
		Resources: resources, InitialEvents: []api.Event{api.UserMessage(string(script))},
	})
	if err != nil {
		return err
	}
	d.printf("         session %s with both stores, its script of %d tool calls queued\n", d.sess.ID, len(demoCalls))
	return nil
}

// demoHandler turns the worker's log into the demo's narration: the
// mount, each tool call, each sync and what it moved. With -v every record
// also goes to raw.
type demoHandler struct {
	d     *demo
	raw   slog.Handler
	attrs []slog.Attr
}

func (h *demoHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *demoHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &demoHandler{d: h.d, raw: h.raw.WithAttrs(as), attrs: append(slices.Clip(h.attrs), as...)}
}

func (h *demoHandler) WithGroup(name string) slog.Handler {
	return &demoHandler{d: h.d, raw: h.raw.WithGroup(name), attrs: h.attrs}
}

func (h *demoHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.raw.Enabled(ctx, r.Level) {
		h.raw.Handle(ctx, r)
	}
	a := map[string]string{}
	for _, at := range h.attrs {
		a[at.Key] = at.Value.String()
	}
	r.Attrs(func(at slog.Attr) bool {
		a[at.Key] = at.Value.String()
		return true
	})
	d := h.d
	store := d.names[a["memory_store_id"]]
	switch {
	case r.Message == "work item claimed":
		d.printf("claimed  %s for session %s\n", a["work_id"], a["session_id"])
	case r.Message == "memory store mounted":
		d.printf("mounted  %-15q at %s: %s downloaded into %s\n", store, a["mount_path"], plural(a["downloaded"], "memory", "memories"), a["folder"])
	case r.Message == "tool call done":
		d.mu.Lock()
		d.calls++
		n := d.calls
		d.mu.Unlock()
		what, tick := "", false
		if n <= len(demoCalls) {
			what, tick = demoCalls[n-1].what, demoCalls[n-1].tick
		}
		// The sync that follows a call reads the clock after this line is
		// logged, so moving it now makes that sync due.
		defer func() {
			if tick {
				d.skew.Add(int64(memsync.MinInterval))
				d.printf("clock    +%v: the sync interval has passed, so a sync follows this call\n", memsync.MinInterval)
			}
		}()
		outcome := "ok     "
		if a["is_error"] == "true" {
			outcome = "REFUSED"
		}
		summary := a["summary"]
		if summary == "" {
			summary = "(no output)"
		}
		d.printf("call %d   %-5s %-50s %s %s\n", n, a["tool"], what, outcome, summary)
	case r.Message == "session sandbox":
		d.mu.Lock()
		d.sandbox = a["sandbox"]
		d.mu.Unlock()
		if a["sandbox"] == string(sandbox.None) {
			d.printf("sandbox  none: bash runs unconfined and sees the host's files, not the stores at /mnt/memory (install bubblewrap to confine it)\n")
		} else {
			d.printf("sandbox  bwrap: bash sees its workdir, %s read-write and %s read-only, and nothing else of this machine; network %s\n",
				strings.Trim(a["stores"], "[]"), strings.Trim(a["read_only_stores"], "[]"), a["network"])
		}
	case r.Message == "session served":
		d.printf("ended    %s; a final memory sync follows\n", a["ended"])
	case r.Message == "uploaded" || r.Message == "downloaded":
		d.mu.Lock()
		mounting := d.calls == 0
		d.mu.Unlock()
		if !mounting { // the mount line counts those
			d.printf("  sync   %s %s (%s)\n", r.Message, a["path"], store)
		}
	case r.Message == "memory store synced":
		d.printf("  sync   %q: %s synced\n", store, plural(a["changes"], "change", "changes"))
	case r.Message == "session memory finished":
		d.printf("memory   final sync: %s; flush: %s; %s removed\n",
			plural(a["final_sync_changes"], "change", "changes"), plural(a["flush_changes"], "change", "changes"), plural(a["folders_removed"], "mount folder", "mount folders"))
	case r.Message == "work item stopped" || strings.HasPrefix(r.Message, "work item released"):
		d.printf("stopped  %s: the worker let go of it\n", a["work_id"])
		d.once.Do(func() { close(d.done) })
	case r.Level >= slog.LevelWarn:
		d.printf("%-8s %s %s\n", r.Level, r.Message, a["err"]+a["reason"])
	}
	return nil
}

// check compares the server's state with what the script should have
// done, printing one line per check, and returns how many failed.
func (d *demo) check(ctx context.Context) (failed int) {
	ok := func(cond bool, format string, a ...any) {
		mark := "✓"
		if !cond {
			mark = "✗"
			failed++
		}
		d.printf("  %s %s\n", mark, fmt.Sprintf(format, a...))
	}
	d.printf("\nVersions on the server, newest first\n")
	versions := map[string][]api.MemoryVersion{}
	for _, name := range []string{demoNotes, demoBook} {
		st := d.stores[name]
		d.printf("  %s (%s)\n", name, st.ID)
		for v, err := range d.admin.ListAllMemoryVersions(ctx, st.ID, client.ListMemoryVersionsParams{}) {
			if err != nil {
				d.printf("    cannot list versions: %v\n", err)
				failed++
				break
			}
			versions[name] = append(versions[name], v)
			path := ""
			if v.Path != nil {
				path = *v.Path
			}
			d.printf("    %-32s %-9s by %s\n", path, v.Operation, d.actor(v.CreatedBy))
		}
	}

	d.printf("\nChecks\n")
	sess, err := d.admin.GetSession(ctx, d.sess.ID)
	ok(err == nil && sess.Status == api.SessionTerminated, "the session terminated")
	var results []api.Event
	for e, err := range d.admin.ListAllEvents(ctx, d.sess.ID, api.EventListParams{Limit: 1000, Types: []string{api.EventUserToolResult}}) {
		if err != nil {
			break
		}
		results = append(results, e)
	}
	ok(len(results) == len(demoCalls), "every tool call was answered once (%d of %d)", len(results), len(demoCalls))
	for i, r := range results {
		if i >= len(demoCalls) {
			break
		}
		isErr := r.IsError != nil && *r.IsError
		switch {
		case demoCalls[i].refused:
			ok(isErr && strings.Contains(r.Text(), "read-only"), "call %d was refused: %s", i+1, firstLine(r.Text()))
		case demoCalls[i].sandboxed && d.sandbox == string(sandbox.None):
			ok(isErr, "call %d failed, as it must without a sandbox: %s", i+1, firstLine(r.Text()))
		case isErr:
			ok(false, "call %d failed: %s", i+1, firstLine(r.Text()))
		}
	}
	notes := d.stores[demoNotes]
	ok(d.content(ctx, notes.ID, "/decisions/2026-05-up.md") == demoDecision, "the new memory is on the server with the agent's content")
	ok(strings.HasPrefix(d.content(ctx, notes.ID, "/todo.md"), "- [x] write the demo"), "the edit of /todo.md is on the server")
	ok(d.content(ctx, d.stores[demoBook].ID, "/style.md") == "Write short sentences.\n" && len(versions[demoBook]) == 1, "the read-only store is unchanged")
	bySession := 0
	for _, v := range versions[demoNotes] {
		if v.CreatedBy.Type == api.SessionActor && v.CreatedBy.SessionID == d.sess.ID {
			bySession++
		}
	}
	ok(bySession == 2, "the agent's two changes are versions written by the session (session_actor %s)", d.sess.ID)
	entries, _ := os.ReadDir(filepath.Join(d.tmp, "mnt"))
	ok(len(entries) == 0, "the worker removed the mount folders it created")
	return failed
}

// content is a memory's content, "" when it cannot be read.
func (d *demo) content(ctx context.Context, storeID, path string) string {
	for item, err := range d.admin.ListAllMemories(ctx, storeID, client.ListMemoriesParams{View: api.ViewFull}) {
		if err != nil {
			return ""
		}
		if item.Memory != nil && item.Memory.Path == path && item.Memory.Content != nil {
			return *item.Memory.Content
		}
	}
	return ""
}

func (d *demo) actor(a api.Actor) string {
	switch a.Type {
	case api.SessionActor:
		if a.SessionID == d.sess.ID {
			return "session " + a.SessionID + " (the agent, through the worker)"
		}
		return "session " + a.SessionID
	case api.APIActor:
		return "API key " + a.APIKeyID + " (the demo's setup)"
	}
	return a.Type
}

// plural is "1 memory", "3 memories".
func plural(n, one, many string) string {
	if n == "1" {
		return n + " " + one
	}
	return n + " " + many
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
