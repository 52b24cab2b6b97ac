package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

// A store, a memory, a guarded edit and a full listing: the calls a sync
// pass makes.
func Example() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080", client.WithAPIKey("sk-memstore-…"))
	if err != nil {
		log.Fatal(err)
	}
	store, err := c.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		log.Fatal(err)
	}
	m, err := c.CreateMemory(ctx, store.ID, api.CreateMemoryRequest{Path: "/todo.md", Content: "- ship"})
	if client.IsType(err, api.MemoryPathConflict) {
		log.Fatal("someone else wrote /todo.md first")
	} else if err != nil {
		log.Fatal(err)
	}
	// Only if nobody changed it since: a 409 means the server won.
	edited := "- ship\n- celebrate"
	_, err = c.UpdateMemory(ctx, store.ID, m.ID, api.UpdateMemoryRequest{
		Content:      &edited,
		Precondition: &api.Precondition{Type: "content_sha256", ContentSHA256: m.ContentSHA256},
	})
	if client.IsType(err, api.MemoryPreconditionFailed) {
		log.Print("changed on the server meanwhile; re-read it")
	}
	for item, err := range c.ListAllMemories(ctx, store.ID, client.ListMemoriesParams{View: api.ViewFull}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(item.Memory.Path, item.Memory.ContentSHA256)
	}
	st := c.Stats()
	fmt.Printf("%d requests, %d bytes sent, %d received\n", st.Requests, st.BytesSent, st.BytesReceived)
}

// A worker claims an item with its environment key, then does everything
// for that item with the sessions token from the item's secret.
func ExampleClient_PollWork() {
	ctx := context.Background()
	env, err := client.New("http://127.0.0.1:8080", client.WithBearerToken("env-key-…"), client.WithWorkerID("host-1"))
	if err != nil {
		log.Fatal(err)
	}
	w, err := env.PollWork(ctx, "env_…", api.WorkPollParams{BlockMS: api.MaxPollBlockMS})
	if err != nil || w == nil {
		return // an error to back off from, or no work yet
	}
	if _, err := env.AckWork(ctx, w.EnvironmentID, w.ID); err != nil {
		log.Fatal(err)
	}
	secret, err := api.DecodeWorkSecret(*w.Secret)
	if err != nil {
		log.Fatal(err)
	}
	item := env.With(client.WithBearerToken(secret.SessionsToken)) // shares env's Stats
	hb, err := item.HeartbeatWork(ctx, w.EnvironmentID, w.ID, api.WorkHeartbeatParams{ExpectedLastHeartbeat: api.NoHeartbeat})
	if state, lost := client.StaleHeartbeat(err); lost {
		log.Printf("lease lost (server holds %+v); drop the item", state)
		return
	}
	fmt.Println("lease until the next beat, state", hb.State)
}

// Follow a session's events, resuming after a dropped connection from the
// last event seen.
func ExampleClient_StreamEvents() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080", client.WithAPIKey("sk-memstore-…"))
	if err != nil {
		log.Fatal(err)
	}
	last := ""
	for ctx.Err() == nil {
		s, err := c.StreamEvents(ctx, "sesn_…", client.StreamEventsParams{LastEventID: last})
		if err != nil {
			log.Fatal(err)
		}
		for s.Next() {
			e := s.Event()
			fmt.Println(e.Type, e.Text())
			if e.Type == api.EventSessionStatusTerminated {
				s.Close()
				return
			}
		}
		last = s.LastEventID()
		s.Close()
		time.Sleep(max(s.ReconnectDelay(), time.Second))
	}
}
