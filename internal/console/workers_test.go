package console_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testserver"
)

// The environment page says how many sessions each worker serves now: two
// workers claim three sessions between them, and the page counts two and
// one; once one of the first worker's items is stopped, it counts one
// each.
func TestEnvironmentPageCountsTheSessionsEachWorkerServes(t *testing.T) {
	srv := startConsole(t)
	ctx := context.Background()
	admin := srv.Admin(t)
	ws := testserver.NewWorkers(t, admin, testserver.ScriptedAgent())
	for range 3 {
		if _, err := admin.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: ws.Agent.ID}, EnvironmentID: ws.Env.ID,
			InitialEvents: []api.Event{api.UserMessage(`{"tool_calls":[]}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(worker string) api.Work {
		t.Helper()
		c := srv.Client(t, client.WithBearerToken(ws.Key), client.WithWorkerID(worker))
		w, err := c.PollWork(ctx, ws.Env.ID, api.WorkPollParams{})
		if err != nil || w == nil {
			t.Fatalf("poll as %s: %v, %v", worker, w, err)
		}
		if _, err := c.AckWork(ctx, ws.Env.ID, w.ID); err != nil {
			t.Fatal(err)
		}
		return *w
	}
	first := claim("host-a")
	claim("host-a")
	claim("host-b")

	v := newVisitor(t, srv)
	v.login("ada", testPassword)
	rows := func() [][]string {
		_, page := v.do("GET", "/console/environments/"+ws.Env.ID, nil)
		var out [][]string
		for _, m := range regexp.MustCompile(`<tr><td><code>(host-[ab])</code></td><td>(\d+)</td></tr>`).FindAllStringSubmatch(page, -1) {
			out = append(out, m[1:])
		}
		return out
	}
	if got := rows(); len(got) != 2 || got[0][0] != "host-a" || got[0][1] != "2" || got[1][0] != "host-b" || got[1][1] != "1" {
		t.Fatalf("workers on the environment page = %q, want host-a serving 2 and host-b 1", got)
	}
	if err := srv.Client(t, client.WithBearerToken(ws.Key)).StopWork(ctx, ws.Env.ID, first.ID, api.StopWorkRequest{Force: true}); err != nil {
		t.Fatal(err)
	}
	if got := rows(); len(got) != 2 || got[0][1] != "1" || got[1][1] != "1" {
		t.Fatalf("workers after one item stopped = %q, want one session each", got)
	}
}
