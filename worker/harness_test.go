package worker

// The real parts the worker's tests run against: memstore's server
// (internal/testserver: httptest over a real SQLite file), with an
// environment and its key and a scripted agent; real folders for the
// workdir and mounts.

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testlog"
	"github.com/memstore/memstore/internal/testserver"
)

// serverClock is the server's clock: real time plus an offset a test can
// push forward, to make a lease lapse without waiting for it.
type serverClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *serverClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *serverClock) advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

// testServer is a running memstore server and its clock.
type testServer struct {
	*testserver.Server
	clock *serverClock
}

// startServer starts a server whose sessions mount stores under
// mountPrefix ("" for /mnt/memory, the default). Its streams send no
// keepalives, so that a test's log holds only what the worker did.
func startServer(t *testing.T, mountPrefix string) *testServer {
	return startServerWith(t, testserver.Options{MountPrefix: mountPrefix})
}

// startServerWith starts a server with o, on a clock a test can push.
func startServerWith(t *testing.T, o testserver.Options) *testServer {
	t.Helper()
	clock := &serverClock{}
	o.Now, o.StreamKeepalive = clock.now, time.Hour
	return &testServer{Server: testserver.Start(t, o), clock: clock}
}

// testClient is a client of ts whose retries do not sleep.
func testClient(t *testing.T, ts *testServer, opts ...client.Option) *client.Client {
	t.Helper()
	return ts.Client(t, opts...)
}

// fixture is an environment with a key and a scripted agent on a server.
type fixture struct {
	t     *testing.T
	srv   *testServer
	admin *client.Client
	env   *api.Environment
	key   string
	agent *api.Agent
}

func newFixture(t *testing.T, mountPrefix string) *fixture {
	return newFixtureWith(t, startServer(t, mountPrefix), testserver.ScriptedAgent())
}

// newFixtureWith is a fixture on srv whose agent is created by agentReq.
func newFixtureWith(t *testing.T, srv *testServer, agentReq api.CreateAgentRequest) *fixture {
	t.Helper()
	admin := srv.Admin(t)
	ws := testserver.NewWorkers(t, admin, agentReq)
	return &fixture{t: t, srv: srv, admin: admin, env: ws.Env, key: ws.Key, agent: ws.Agent}
}

// toolCall is one call of a script.
func toolCall(name string, input map[string]any) api.ScriptedToolCall {
	b, err := json.Marshal(input)
	if err != nil {
		panic(err)
	}
	return api.ScriptedToolCall{Name: name, Input: b}
}

// script is the text of a user.message for the scripted agent.
func script(end string, calls ...api.ScriptedToolCall) string {
	b, err := json.Marshal(api.ScriptedScript{ToolCalls: calls, End: end})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// session creates a session whose first message is text, with the given
// memory stores attached.
func (f *fixture) session(text string, resources ...api.SessionResourceParams) *api.Session {
	f.t.Helper()
	s, err := f.admin.CreateSession(context.Background(), api.CreateSessionRequest{
		Agent: api.AgentRef{ID: f.agent.ID}, EnvironmentID: f.env.ID,
		Resources: resources, InitialEvents: []api.Event{api.UserMessage(text)},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// config is a worker configuration for this fixture with a fresh workdir,
// beating every 20 ms so that a lease change shows at once.
func (f *fixture) config(logs *testlog.Buffer) Config {
	return Config{
		Client:            testClient(f.t, f.srv),
		EnvironmentID:     f.env.ID,
		EnvironmentKey:    f.key,
		WorkerID:          "test-worker",
		Workdir:           f.t.TempDir(),
		HeartbeatInterval: 20 * time.Millisecond,
		Logger:            logs.Text(),
	}
}

func (f *fixture) worker(cfg Config) *Worker {
	f.t.Helper()
	w, err := New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	return w
}

// claim polls the queue with the environment key and acknowledges what it
// got, as the poll loop does before it hands an item over.
func (f *fixture) claim() api.Work {
	f.t.Helper()
	ctx := context.Background()
	env := testClient(f.t, f.srv, client.WithBearerToken(f.key), client.WithWorkerID("test-claimer"))
	w, err := env.PollWork(ctx, f.env.ID, api.WorkPollParams{BlockMS: api.MaxPollBlockMS})
	if err != nil || w == nil {
		f.t.Fatalf("poll: %v, %v", w, err)
	}
	if _, err := env.AckWork(ctx, w.EnvironmentID, w.ID); err != nil {
		f.t.Fatal(err)
	}
	return *w
}

func (f *fixture) events(sessionID string) []api.Event {
	f.t.Helper()
	var out []api.Event
	for e, err := range f.admin.ListAllEvents(context.Background(), sessionID, api.EventListParams{Limit: 1000}) {
		if err != nil {
			f.t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func (f *fixture) getSession(id string) *api.Session {
	f.t.Helper()
	s, err := f.admin.GetSession(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func (f *fixture) work(id string) *api.Work {
	f.t.Helper()
	w, err := f.admin.GetWork(context.Background(), f.env.ID, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return w
}

// sessionWork is the id of the session's latest work item.
func (f *fixture) sessionWork(sessionID string) *api.Work {
	f.t.Helper()
	var last *api.Work
	for w, err := range f.admin.ListAllWork(context.Background(), f.env.ID, api.WorkListParams{}) {
		if err != nil {
			f.t.Fatal(err)
		}
		if w.Data.ID == sessionID {
			w := w
			last = &w
		}
	}
	if last == nil {
		f.t.Fatalf("session %s has no work item", sessionID)
	}
	return last
}

// results are the session's tool results by the name of the call they
// answer, in log order.
type toolResult struct {
	name    string
	text    string
	isError bool
}

func toolResults(events []api.Event) []toolResult {
	names := map[string]string{}
	var out []toolResult
	for _, e := range events {
		switch e.Type {
		case api.EventAgentToolUse:
			names[e.ID] = e.Name
		case api.EventUserToolResult:
			out = append(out, toolResult{name: names[e.ToolUseID], text: e.Text(), isError: e.IsError != nil && *e.IsError})
		}
	}
	return out
}

func lastOfType(events []api.Event, typ string) *api.Event {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Type == typ {
			return &events[i]
		}
	}
	return nil
}

// waitFor polls cond until it holds, failing the test after 30 s. The
// worker runs in other goroutines; this is how a test waits for what it
// did to show on the server.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runWorker runs w.Run in the background; the returned stop cancels it
// and returns Run's error.
func runWorker(t *testing.T, w *Worker) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}
