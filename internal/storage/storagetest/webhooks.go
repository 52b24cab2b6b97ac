package storagetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/webhooks"
)

func (f *cpFixture) webhookEndpoint(types ...string) webhooks.Endpoint {
	f.t.Helper()
	now := f.clock.Now()
	e := webhooks.Endpoint{WebhookEndpoint: api.WebhookEndpoint{ID: ids.NewAt(ids.Webhook, now), Type: "webhook_endpoint", URL: "https://example.test/hook",
		EnabledEvents: types, State: webhooks.StateEnabled, CreatedAt: now, UpdatedAt: now}, Secret: "whsec_c2VjcmV0"}
	if err := f.s.CreateWebhookEndpoint(f.ctx, e); err != nil {
		f.t.Fatal(err)
	}
	return e
}

// claimAll claims every delivery due now under token.
func (f *cpFixture) claimAll(token string, p webhooks.Policy) []webhooks.Delivery {
	f.t.Helper()
	ds, err := f.s.ClaimDeliveries(f.ctx, f.clock.Now(), 100, token, p)
	if err != nil {
		f.t.Fatal(err)
	}
	return ds
}

// finish records one attempt of delivery seq claimed under token.
func (f *cpFixture) finish(seq int64, token string, a webhooks.Attempt, p webhooks.Policy) error {
	return f.s.FinishDeliveries(f.ctx, token, []webhooks.Result{{Seq: seq, Attempt: &a}}, p)
}

// eventTypes returns the type and object of each delivery's payload.
func eventTypes(t *testing.T, ds []webhooks.Delivery) []string {
	t.Helper()
	var out []string
	for _, d := range ds {
		var env webhooks.Envelope
		if err := json.Unmarshal(d.Payload, &env); err != nil {
			t.Fatal(err)
		}
		if env.ID != d.EventID || env.Type != "event" || env.Data.Type != d.EventType {
			t.Fatalf("payload %s does not match delivery %+v", d.Payload, d)
		}
		out = append(out, env.Data.Type+" "+env.Data.ID)
	}
	return out
}

func testWebhookEndpoints(t *testing.T, open Factory) {
	f := newCPFixture(t, open)
	e := f.webhookEndpoint(webhooks.SessionCreated)
	got, err := f.s.GetWebhookEndpoint(f.ctx, e.ID)
	if err != nil || got.Secret != e.Secret || got.URL != e.URL || !slices.Equal(got.EnabledEvents, e.EnabledEvents) {
		t.Fatalf("get = %+v, %v; want %+v", got, err, e)
	}
	boom := errors.New("boom")
	if _, err := f.s.UpdateWebhookEndpoint(f.ctx, e.ID, func(x *webhooks.Endpoint) error { x.Name = "changed"; return boom }); !errors.Is(err, boom) {
		t.Fatalf("update error = %v", err)
	}
	up, err := f.s.UpdateWebhookEndpoint(f.ctx, e.ID, func(x *webhooks.Endpoint) error { x.Name = "hook"; return nil })
	if err != nil || up.Name != "hook" {
		t.Fatalf("update = %+v, %v", up, err)
	}
	f.clock.Advance(time.Millisecond)
	second := f.webhookEndpoint(webhooks.SessionDeleted)
	list, err := f.s.ListWebhookEndpoints(f.ctx, storage.ListQuery{Limit: 10})
	if err != nil || len(list) != 2 || list[0].ID != second.ID || list[1].Name != "hook" {
		t.Fatalf("list = %+v, %v", list, err)
	}
	if err := f.s.DeleteWebhookEndpoint(f.ctx, e.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.GetWebhookEndpoint(f.ctx, e.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("get deleted = %v", err)
	}
	if err := f.s.DeleteWebhookEndpoint(f.ctx, e.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("delete twice = %v", err)
	}
}

// testWebhookOutbox: each change stores its events for the endpoints that
// subscribed, in change order; a refused change stores none.
func testWebhookOutbox(t *testing.T, open Factory) {
	f := newCPFixture(t, open)
	p := webhooks.Policy{}.WithDefaults()
	all := f.webhookEndpoint(webhooks.Types...)
	only := f.webhookEndpoint(webhooks.SessionStatusRunStarted)

	env := f.newEnvironment("hooks")
	st := f.memoryStore("notes")
	sess, _ := f.newSession(env, f.resource(st, "read_write", "/mnt/memory/notes"))
	if _, err := f.s.AppendEvents(f.ctx, sess.ID, []api.Event{{Type: api.EventSessionStatusRunning},
		{Type: api.EventSessionStatusIdle, StopReason: &api.StopReason{Type: api.StopRequiresAction}}}, nil); err != nil {
		t.Fatal(err)
	}
	// Refused changes emit nothing.
	if err := f.s.DeleteEnvironment(f.ctx, env.ID); !errors.Is(err, storage.ErrEnvironmentInUse) {
		t.Fatalf("delete env in use = %v", err)
	}
	if _, err := f.s.AppendEvents(f.ctx, sess.ID, []api.Event{{Type: api.EventSessionStatusTerminated}}, func(storage.SessionView) error { return errors.New("no") }); err == nil {
		t.Fatal("guard did not refuse")
	}
	if _, err := f.s.ArchiveMemoryStore(f.ctx, st.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.ArchiveMemoryStore(f.ctx, st.ID); err != nil { // already archived: no second event
		t.Fatal(err)
	}
	now := f.clock.Now()
	if _, err := f.s.UpdateSession(f.ctx, sess.ID, func(x *api.Session) error { x.ArchivedAt = &now; return nil }); err != nil {
		t.Fatal(err)
	}

	// Per endpoint and object, one at a time: settle each head to see the next.
	var got []string
	for range 20 {
		ds := f.claimAll("t", p)
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			if d.EndpointID == all.ID {
				got = append(got, eventTypes(t, []webhooks.Delivery{d})...)
			}
			if err := f.finish(d.Seq, "t", webhooks.Attempt{AttemptedAt: f.clock.Now(), StatusCode: 204}, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := []string{
		webhooks.EnvironmentCreated + " " + env.ID,
		webhooks.MemoryStoreCreated + " " + st.ID,
		webhooks.SessionCreated + " " + sess.ID,
		webhooks.SessionStatusRunStarted + " " + sess.ID,
		webhooks.SessionStatusIdled + " " + sess.ID,
		webhooks.SessionRequiresAction + " " + sess.ID,
		webhooks.MemoryStoreArchived + " " + st.ID,
		webhooks.SessionArchived + " " + sess.ID,
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("events delivered:\n%q\nwant\n%q", got, want)
	}
	ds, err := f.s.ListWebhookDeliveries(f.ctx, only.ID, storage.ListQuery{Limit: 10})
	if err != nil || len(ds) != 1 || ds[0].Delivery.EventType != webhooks.SessionStatusRunStarted || ds[0].Delivery.State != webhooks.Delivered || len(ds[0].Attempts) != 1 {
		t.Fatalf("deliveries of the narrow endpoint = %+v, %v", ds, err)
	}

	// Deliveries page newest first, after the last one seen.
	first, err := f.s.ListWebhookDeliveries(f.ctx, all.ID, storage.ListQuery{Limit: 3})
	if err != nil || len(first) != 3 {
		t.Fatalf("first page = %+v, %v", first, err)
	}
	last := first[2].Delivery.EventID
	rest, err := f.s.ListWebhookDeliveries(f.ctx, all.ID, storage.ListQuery{After: last, Limit: 10})
	if err != nil || len(rest) != len(want)-3 || rest[0].Delivery.EventID >= last || first[0].Delivery.EventID <= first[1].Delivery.EventID {
		t.Fatalf("second page = %+v, %v (after %s)", rest, err, last)
	}

	// Pruning takes the settled deliveries made before the cut, never a
	// pending one.
	f.clock.Advance(time.Hour)
	if _, err := f.s.AppendEvents(f.ctx, sess.ID, []api.Event{{Type: api.EventSessionStatusRunning}}, nil); err != nil {
		t.Fatal(err)
	}
	n, err := f.s.PruneWebhookDeliveries(f.ctx, f.clock.Now())
	if err != nil || n != int64(len(want)+1) {
		t.Fatalf("pruned %d, %v; want %d", n, err, len(want)+1)
	}
	for _, e := range []webhooks.Endpoint{all, only} {
		ds, err := f.s.ListWebhookDeliveries(f.ctx, e.ID, storage.ListQuery{})
		if err != nil || len(ds) != 1 || ds[0].Delivery.State != webhooks.Pending {
			t.Fatalf("after pruning %s holds %+v, %v; want the pending one", e.ID, ds, err)
		}
	}
}

// testWebhookRetries: a failed head holds back the object's later events
// until it is due again; a lost lease settles nothing; a delivery failing
// past the retry window fails and disables its endpoint, which then gets no
// new events.
func testWebhookRetries(t *testing.T, open Factory) {
	f := newCPFixture(t, open)
	p := webhooks.Policy{FirstBackoff: time.Second, MaxBackoff: 4 * time.Second, RetryFor: 10 * time.Second, Lease: time.Minute}
	e := f.webhookEndpoint(webhooks.SessionCreated, webhooks.SessionStatusRunStarted, webhooks.SessionStatusIdled)
	a, _ := f.newSession(f.env)
	if _, err := f.s.AppendEvents(f.ctx, a.ID, []api.Event{{Type: api.EventSessionStatusRunning}}, nil); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Millisecond)
	b, _ := f.newSession(f.env)

	ds := f.claimAll("t1", p)
	if got := eventTypes(t, ds); !slices.Equal(got, []string{webhooks.SessionCreated + " " + a.ID, webhooks.SessionCreated + " " + b.ID}) {
		t.Fatalf("first claim = %q", got)
	}
	if again := f.claimAll("t2", p); len(again) != 0 {
		t.Fatalf("leased deliveries claimed again: %q", eventTypes(t, again))
	}
	fail := webhooks.Attempt{AttemptedAt: f.clock.Now(), StatusCode: 503, ResponseExcerpt: "down"}
	if err := f.finish(ds[0].Seq, "t1", fail, p); err != nil {
		t.Fatal(err)
	}
	if err := f.finish(ds[1].Seq, "stale", webhooks.Attempt{AttemptedAt: f.clock.Now(), StatusCode: 200}, p); err != nil {
		t.Fatal(err)
	}
	if got := f.claimAll("t3", p); len(got) != 0 {
		t.Fatalf("a's retry is not due and b's lease holds, yet claimed %q", eventTypes(t, got))
	}
	f.clock.Advance(time.Second)
	retry := f.claimAll("t4", p)
	if got := eventTypes(t, retry); !slices.Equal(got, []string{webhooks.SessionCreated + " " + a.ID}) {
		t.Fatalf("after the backoff claimed %q, want a's session.created again (and not its later event)", got)
	}
	if err := f.finish(retry[0].Seq, "t4", webhooks.Attempt{AttemptedAt: f.clock.Now(), StatusCode: 500}, p); err != nil {
		t.Fatal(err)
	}
	// Keep failing past the window: the delivery fails, the endpoint is disabled.
	for i := 0; i < 20; i++ {
		f.clock.Advance(4 * time.Second)
		for _, d := range f.claimAll("t5", p) {
			if err := f.finish(d.Seq, "t5", webhooks.Attempt{AttemptedAt: f.clock.Now(), Error: "connection refused"}, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := f.s.GetWebhookEndpoint(f.ctx, e.ID)
	if err != nil || got.State != webhooks.StateDisabled || got.DisabledReason == "" {
		t.Fatalf("endpoint after failing for long = %+v, %v", got.WebhookEndpoint, err)
	}
	list, err := f.s.ListWebhookDeliveries(f.ctx, e.ID, storage.ListQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, d := range list {
		states[d.Delivery.EventType+" "+fmt.Sprint(len(d.Attempts) > 0)] = d.Delivery.State
	}
	if states[webhooks.SessionCreated+" true"] != webhooks.Failed {
		t.Fatalf("deliveries = %+v", list)
	}
	before := len(list)
	f.newSession(f.env)
	if list, _ := f.s.ListWebhookDeliveries(f.ctx, e.ID, storage.ListQuery{Limit: 10}); len(list) != before {
		t.Fatalf("a disabled endpoint got a new delivery: %d, want %d", len(list), before)
	}
}

// testWebhookGivenBack: a delivery its dispatcher gives back unattempted
// (its endpoint could not be read) is due again at once, with no attempt
// on record, while the other deliveries of the round settle.
func testWebhookGivenBack(t *testing.T, open Factory) {
	f := newCPFixture(t, open)
	p := webhooks.Policy{}.WithDefaults()
	e := f.webhookEndpoint(webhooks.SessionCreated)
	f.newSession(f.env)
	f.newSession(f.env)
	ds := f.claimAll("t1", p)
	if len(ds) != 2 {
		t.Fatalf("claimed %d deliveries, want 2", len(ds))
	}
	ok := webhooks.Attempt{AttemptedAt: f.clock.Now(), StatusCode: 204}
	if err := f.s.FinishDeliveries(f.ctx, "t1", []webhooks.Result{{Seq: ds[0].Seq}, {Seq: ds[1].Seq, Attempt: &ok}}, p); err != nil {
		t.Fatal(err)
	}
	again := f.claimAll("t2", p)
	if len(again) != 1 || again[0].Seq != ds[0].Seq || again[0].Attempts != 0 {
		t.Fatalf("claimed after the round: %+v; want the given-back delivery %d, never attempted", again, ds[0].Seq)
	}
	list, err := f.s.ListWebhookDeliveries(f.ctx, e.ID, storage.ListQuery{})
	if err != nil || len(list) != 2 {
		t.Fatalf("deliveries = %+v, %v", list, err)
	}
	for _, d := range list {
		want := 0
		if d.Delivery.Seq == ds[1].Seq {
			want = 1
		}
		if len(d.Attempts) != want {
			t.Fatalf("delivery %d has %d attempts on record, want %d", d.Delivery.Seq, len(d.Attempts), want)
		}
	}
}

// testDeliveriesStored: the dispatcher's cue comes exactly when a change
// stores deliveries, not for a change that emits nothing or an event no
// endpoint subscribed to.
func testDeliveriesStored(t *testing.T, open Factory) {
	f := newCPFixture(t, open)
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	stored := f.s.DeliveriesStored()
	f.webhookEndpoint(webhooks.SessionCreated)
	st := f.memoryStore("notes") // memory_store.created: nobody subscribed
	if _, err := f.s.CreateMemory(f.ctx, storage.NewMemory{StoreID: st.ID, Path: "/a", Content: "x", By: apiActor, MaxMemories: 10}); err != nil {
		t.Fatal(err)
	}
	f.newEnvironment("other") // environment.created: nobody subscribed
	if closed(stored) {
		t.Fatal("changes that stored no delivery signalled the dispatcher")
	}
	f.newSession(f.env)
	if !closed(stored) {
		t.Fatal("a change that stored a delivery did not signal the dispatcher")
	}
	if closed(f.s.DeliveriesStored()) {
		t.Fatal("a signal handed out after the change is already given")
	}
}

// testConcurrentDeliveryClaims: dispatchers claiming at once never hold the
// same delivery.
func testConcurrentDeliveryClaims(t *testing.T, open Factory) {
	f := newCPFixture(t, open)
	p := webhooks.Policy{}.WithDefaults()
	f.webhookEndpoint(webhooks.SessionCreated)
	const sessions, dispatchers = 8, 6
	for range sessions {
		f.newSession(f.env)
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		seen = map[int64]int{}
		errs = make(chan error, dispatchers)
	)
	for i := range dispatchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ds, err := f.s.ClaimDeliveries(f.ctx, f.clock.Now(), 3, fmt.Sprintf("d%d", i), p)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, d := range ds {
				seen[d.Seq]++
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for seq, n := range seen {
		if n > 1 {
			t.Fatalf("delivery %d claimed %d times", seq, n)
		}
	}
	if len(seen) != sessions {
		t.Fatalf("%d deliveries claimed, want %d", len(seen), sessions)
	}
}
