package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testenv"
	"github.com/memstore/memstore/internal/testserver"
)

// Three `memstore serve` processes on one PostgreSQL database: a session is
// created through replica 1, its worker (a real `worker poll` process)
// reaches replica 2 through a load balancer that fails over to replica 1,
// its events are followed over SSE through replica 3, and another writer
// writes memories through replica 2. Replica 2 is SIGKILLed mid-session.
// The session finishes through the others: every event the follower saw
// is the log, once and in order, every tool call has one result, and
// every memory write a replica acknowledged is there.
func TestThreeReplicasOneKilledMidSession(t *testing.T) {
	const adminKey = "sk-memstore-replicas-admin"
	dbURL := testenv.PostgresSchema(t)
	bin := memstoreBinary(t)
	ctx := t.Context()

	// The load balancer the worker talks to, as in compose.yaml: replica 2
	// while it is up, replica 1 after. It fails over when a connection
	// cannot be made, so no request is sent twice.
	addrs := make([]string, 3)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = ln.Addr().String()
		ln.Close()
	}
	dialer := &net.Dialer{}
	lb := httptest.NewServer(&httputil.ReverseProxy{
		ErrorLog: log.New(io.Discard, "", 0),
		Rewrite:  func(r *httputil.ProxyRequest) { r.SetURL(&url.URL{Scheme: "http", Host: addrs[1]}) },
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addrs[1])
			if err != nil {
				c, err = dialer.DialContext(ctx, network, addrs[0])
			}
			return c, err
		}},
	})
	defer lb.Close()

	replicas := make([]*proc, 3)
	for i, addr := range addrs {
		replicas[i] = startProc(t, bin, []string{"MEMSTORE_ADMIN_KEY=" + adminKey},
			"serve", "--addr", addr, "--data", t.TempDir(), "--database", dbURL, "--public-url", lb.URL)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i, r := range replicas {
				t.Logf("replica %d output:\n%s", i+1, r.out)
			}
		}
	})
	clients := make([]*client.Client, 3)
	for i, addr := range addrs {
		waitUntil(t, fmt.Sprintf("replica %d to answer", i+1), func() bool {
			resp, err := http.Get("http://" + addr + "/healthz")
			if err == nil {
				resp.Body.Close()
			}
			return err == nil && resp.StatusCode == http.StatusOK
		})
		c, err := client.New("http://"+addr, client.WithAPIKey(adminKey))
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c
	}
	r1, r2, r3 := clients[0], clients[1], clients[2]

	ws := testserver.NewWorkers(t, r1, testserver.ScriptedAgent())
	env, key, agent := ws.Env, ws.Key, ws.Agent
	store, err := r1.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	// The kill lands during the pause (sleep), after the first writes.
	script := `{"tool_calls":[` +
		`{"name":"write","input":{"file_path":"/mnt/memory/notes/a.md","content":"a1"}},` +
		`{"name":"bash","input":{"command":"sleep 2"}},` +
		`{"name":"write","input":{"file_path":"/mnt/memory/notes/b.md","content":"b1"}},` +
		`{"name":"edit","input":{"file_path":"/mnt/memory/notes/a.md","old_string":"a1","new_string":"a2"}}` +
		`],"end":"terminate"}`
	want := map[string]string{"/a.md": "a2", "/b.md": "b1"}
	sess, err := r1.CreateSession(ctx, api.CreateSessionRequest{
		Agent: api.AgentRef{ID: agent.ID}, EnvironmentID: env.ID,
		Resources: []api.SessionResourceParams{{Type: api.ResourceMemoryStore, MemoryStoreID: store.ID}},
	})
	if err != nil {
		t.Fatal(err)
	}
	otherStore, err := r1.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "other writer"})
	if err != nil {
		t.Fatal(err)
	}

	// The follower, on replica 3.
	var followed struct {
		sync.Mutex
		events []api.Event
	}
	followCtx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	followerDone, connected := make(chan error, 1), make(chan struct{})
	go func() {
		last := ""
		for followCtx.Err() == nil {
			s, err := r3.StreamEvents(followCtx, sess.ID, client.StreamEventsParams{LastEventID: last})
			if err != nil {
				if followCtx.Err() != nil {
					err = nil
				}
				followerDone <- err
				return
			}
			if last == "" {
				close(connected)
			}
			for s.Next() {
				followed.Lock()
				followed.events = append(followed.events, s.Event())
				followed.Unlock()
			}
			last = s.LastEventID()
			s.Close()
		}
		followerDone <- nil
	}()
	seen := func(typ string) int {
		followed.Lock()
		defer followed.Unlock()
		return countType(followed.events, typ)
	}

	select {
	case <-connected:
	case err := <-followerDone:
		t.Fatalf("the follower could not connect to replica 3: %v", err)
	}
	if _, err := r1.SendEvents(ctx, sess.ID, api.UserMessage(script)); err != nil {
		t.Fatal(err)
	}

	mountRoot := t.TempDir()
	worker := startProc(t, bin, []string{"ANTHROPIC_BASE_URL=" + lb.URL, "ANTHROPIC_ENVIRONMENT_ID=" + env.ID, "ANTHROPIC_ENVIRONMENT_KEY=" + key},
		"worker", "poll", "--mount-root", mountRoot, "--workdir", t.TempDir(), "--sandbox", "none",
		"--memory-sync-interval", "5s", "--lease-ttl", "5s", "--max-idle", "1s", "--log-format", "json")

	// Another writer, through replica 2 until it dies: what it was told
	// was stored must be stored.
	acknowledged := map[string]string{}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for i := 0; ; i++ {
			path, content := fmt.Sprintf("/other/%d.md", i), fmt.Sprintf("write %d", i)
			if _, err := r2.CreateMemory(ctx, otherStore.ID, api.CreateMemoryRequest{Path: path, Content: content}); err != nil {
				return // replica 2 is gone
			}
			acknowledged[path] = content
		}
	}()

	waitUntil(t, "the pause to start (second tool call)", func() bool { return seen(api.EventAgentToolUse) >= 2 })
	t.Log("killing replica 2 mid-session")
	replicas[1].kill()
	<-writerDone
	if len(acknowledged) == 0 {
		t.Fatal("replica 2 acknowledged no write before it was killed")
	}

	waitUntil(t, "the session to finish and its work to stop", func() bool { return sessionFinished(r1, env.ID, sess.ID) })

	// The log, read through replica 1: each event once, each tool call
	// answered once, and the follower on replica 3 saw exactly it.
	var events []api.Event
	for e, err := range r1.ListAllEvents(ctx, sess.ID, api.EventListParams{Limit: 1000}) {
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	waitUntil(t, "the follower to see the session end", func() bool { return seen(api.EventSessionStatusTerminated) > 0 })
	stopFollowing()
	if err := <-followerDone; err != nil {
		t.Fatalf("the follower on replica 3: %v", err)
	}
	followed.Lock()
	if got, want := eventIDs(followed.events), eventIDs(events); got != want {
		t.Errorf("the follower saw\n%s\nthe log is\n%s", got, want)
	}
	followed.Unlock()
	checkToolCalls(t, events, 4)

	// Every acknowledged write, the agent's and the other writer's.
	for _, st := range []struct {
		id   string
		want map[string]string
	}{{store.ID, want}, {otherStore.ID, acknowledged}} {
		got := storeContents(t, r3, st.id)
		for p, c := range st.want {
			if got[p] != c {
				t.Errorf("store %s: memory %s = %q, want %q", st.id, p, got[p], c)
			}
		}
	}
	// The worker did poll replica 2, and went on through replica 1.
	if !strings.Contains(replicas[1].out.String(), "path=/v1/environments/"+env.ID+"/work/poll") {
		t.Error("the worker never polled replica 2")
	}
	toolResultsOn1 := false
	for _, line := range strings.Split(replicas[0].out.String(), "\n") {
		if strings.Contains(line, "method=POST path=/v1/sessions/"+sess.ID+"/events") && strings.Contains(line, "credential_id=sesstok_") {
			toolResultsOn1 = true
		}
	}
	if !toolResultsOn1 {
		t.Error("no tool result reached replica 1 after replica 2 died")
	}
	_ = worker.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-worker.done:
	case <-time.After(30 * time.Second):
		t.Errorf("the worker did not stop on SIGTERM")
	}
	if t.Failed() {
		t.Logf("worker output:\n%s", worker.out)
	}
}

// eventIDs lists events one per line, "id type", for comparing logs.
func eventIDs(events []api.Event) string {
	s := ""
	for _, e := range events {
		s += e.ID + " " + e.Type + "\n"
	}
	return s
}
