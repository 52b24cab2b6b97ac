package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testclock"
	"github.com/memstore/memstore/internal/testserver"
)

// A worker that holds another session and has stopped polling is busy,
// not missing: the chat says so, names the session it is busy with, and
// does not tell the user to start a worker as if none existed.
func TestChatTellsABusyWorkerFromAMissingOne(t *testing.T) {
	clock := testclock.New(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	srv := testserver.Start(t, testserver.Options{Now: clock.Now})
	ctx := context.Background()
	admin := srv.Admin(t)
	ws := testserver.NewWorkers(t, admin, testserver.ScriptedAgent())

	// The worker claims a first session and works on it…
	first, err := admin.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: ws.Agent.ID}, EnvironmentID: ws.Env.ID})
	if err != nil {
		t.Fatal(err)
	}
	worker := srv.Client(t, client.WithBearerToken(ws.Key), client.WithWorkerID("laptop"))
	item, err := worker.PollWork(ctx, ws.Env.ID, api.WorkPollParams{BlockMS: 500})
	if err != nil || item == nil || item.Data.ID != first.ID {
		t.Fatalf("poll = %+v, %v; want the first session's item", item, err)
	}
	if _, err := worker.AckWork(ctx, ws.Env.ID, item.ID); err != nil {
		t.Fatal(err)
	}
	// …and has not polled since its last poll left the window.
	clock.Advance(api.WorkersPollingWindow + time.Second)
	if st, err := admin.WorkStats(ctx, ws.Env.ID); err != nil || st.WorkersPolling != 0 {
		t.Fatalf("stats = %+v, %v; want no worker polling", st, err)
	}

	sess, err := admin.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: ws.Agent.ID}, EnvironmentID: ws.Env.ID})
	if err != nil {
		t.Fatal(err)
	}
	out := chatUntilWorkerCheck(t, ctx, admin, sess.ID)
	busy := "the worker of environment " + ws.Env.ID + " is busy with 1 other session(s) (" + first.ID + ") and polls for no more"
	if !strings.Contains(out.String(), busy) {
		t.Errorf("the chat does not say %q:\n%s", busy, out)
	}
	if strings.Contains(out.String(), "no worker is polling") {
		t.Errorf("the chat calls a busy worker missing:\n%s", out)
	}
}
