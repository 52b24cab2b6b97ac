package server

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
)

// leaseFixture is an environment with a key and one session queued.
type leaseFixture struct {
	*cpEnv
	env  api.Environment
	key  string
	sess api.Session
}

func newLeaseFixture(t *testing.T) *leaseFixture {
	e := newCPEnv(t)
	f := &leaseFixture{cpEnv: e, env: e.environment("build")}
	f.key = e.envKey(f.env.ID)
	f.sess = e.session(f.env.ID, e.scriptedAgent().ID, nil)
	return f
}

func (f *leaseFixture) workPath(workID, suffix string) string {
	return "/v1/environments/" + f.env.ID + "/work/" + workID + suffix
}

func TestTwoConcurrentPollersNeverGetTheSameItem(t *testing.T) {
	f := newLeaseFixture(t)
	results := make([]*api.Work, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := f.call("GET", "/v1/environments/"+f.env.ID+"/work/poll?block_ms=50", f.key, nil, "Anthropic-Worker-ID", []string{"a", "b"}[i])
			if r.status != 200 {
				t.Errorf("poll %d: %d %s", i, r.status, r.body)
				return
			}
			r.decode(t, &results[i])
		}(i)
	}
	wg.Wait()
	got := 0
	for _, w := range results {
		if w != nil {
			got++
			if w.Data.ID != f.sess.ID || w.EnvironmentID != f.env.ID || w.State != api.WorkQueued {
				t.Fatalf("claimed %+v", w)
			}
		}
	}
	if got != 1 {
		t.Fatalf("%d pollers got the one item, want exactly 1", got)
	}
}

func TestPollWaitsForWorkAndIsWokenByANewSession(t *testing.T) {
	f := newLeaseFixture(t)
	if w, _ := f.poll(f.env.ID, f.key, "a"); w == nil {
		t.Fatal("the queued item was not claimed")
	}
	done := make(chan *api.Work, 1)
	go func() {
		var w *api.Work
		r := f.call("GET", "/v1/environments/"+f.env.ID+"/work/poll?block_ms=999", f.key, nil, "Anthropic-Worker-ID", "b")
		r.decode(t, &w)
		done <- w
	}()
	// The poll blocks on an empty queue (no item claimable: the first claim
	// is younger than the default 5 s reclaim) until a new session wakes it.
	f.waitForPoller(f.env.ID)
	s2 := f.session(f.env.ID, f.sess.Agent.ID, nil)
	w := <-done
	if w == nil || w.Data.ID != s2.ID {
		t.Fatalf("the waiting poll got %+v, want the new session's item", w)
	}
}

func TestPollRefusesBadParameters(t *testing.T) {
	f := newLeaseFixture(t)
	for _, q := range []string{"block_ms=0", "block_ms=1000", "block_ms=x", "reclaim_older_than_ms=0"} {
		r := f.call("GET", "/v1/environments/"+f.env.ID+"/work/poll?"+q, f.key, nil)
		if r.status != 400 || r.errType() != string(api.InvalidRequest) {
			t.Fatalf("%s: %d %s", q, r.status, r.body)
		}
	}
	if st := f.work(f.env.ID, f.workID()); st.State != api.WorkQueued {
		t.Fatalf("a refused poll changed the item: %+v", st)
	}
}

// workID is the session's (only) work item.
func (f *leaseFixture) workID() string {
	f.t.Helper()
	var page api.Page[api.Work]
	f.must(200, "GET", "/v1/environments/"+f.env.ID+"/work", f.apiKey, nil, &page)
	if len(page.Data) == 0 {
		f.t.Fatal("no work item")
	}
	return page.Data[0].ID
}

func TestLeaseExpiresAndIsReclaimedWithANewToken(t *testing.T) {
	f := newLeaseFixture(t)
	w1, sec1 := f.poll(f.env.ID, f.key, "a")
	if sec1.SessionsToken == "" || sec1.APIBaseURL != f.hs.URL {
		t.Fatalf("secret = %+v", sec1)
	}
	var acked api.Work
	f.must(200, "POST", f.workPath(w1.ID, "/ack"), f.key, nil, &acked)
	if acked.State != api.WorkStarting || acked.AcknowledgedAt == nil || acked.Secret != nil {
		t.Fatalf("ack = %+v", acked)
	}
	var hb api.WorkHeartbeat
	f.heartbeat(f.env.ID, w1.ID, sec1.SessionsToken, api.NoHeartbeat).decode(t, &hb)
	if hb.State != api.WorkActive || !hb.LeaseExtended || hb.TTLSeconds != api.DefaultLeaseTTLSeconds || hb.LastHeartbeat == "" || hb.Type != "work_heartbeat" {
		t.Fatalf("first heartbeat = %+v", hb)
	}

	// No beat for longer than the TTL: the item goes back to the queue and
	// another worker claims it, with another token.
	f.clock.Advance(api.DefaultLeaseTTLSeconds*time.Second + time.Second)
	w2, sec2 := f.poll(f.env.ID, f.key, "b")
	if w2 == nil || w2.ID != w1.ID || sec2.SessionsToken == sec1.SessionsToken {
		t.Fatalf("re-claim = %+v (same token: %v)", w2, sec2.SessionsToken == sec1.SessionsToken)
	}

	// The first worker's next beat is a 412 with the lease as it stands; its
	// token no longer reaches the session.
	r := f.heartbeat(f.env.ID, w1.ID, sec1.SessionsToken, hb.LastHeartbeat)
	if r.status != http.StatusPreconditionFailed {
		t.Fatalf("stale holder's heartbeat: %d %s", r.status, r.body)
	}
	var env struct {
		Error struct {
			Details api.HeartbeatPreconditionDetails `json:"details"`
		} `json:"error"`
	}
	r.decode(t, &env)
	if d := env.Error.Details; d.ErrorCode != api.HeartbeatPreconditionFailed || d.CurrentState.State != api.WorkQueued || d.CurrentState.LastHeartbeat != nil || d.CurrentState.LeaseExtended {
		t.Fatalf("412 details = %+v", d)
	}
	if r := f.call("GET", "/v1/sessions/"+f.sess.ID, sec1.SessionsToken, nil); r.status != 403 {
		t.Fatalf("the stale token still reads its session: %d", r.status)
	}
	if r := f.call("POST", f.workPath(w1.ID, "/stop"), sec1.SessionsToken, api.StopWorkRequest{Force: true}); r.status != 403 {
		t.Fatalf("the stale token stopped the item: %d %s", r.status, r.body)
	}
	if got := f.work(f.env.ID, w1.ID); got.State == api.WorkStopped {
		t.Fatal("a refused stop stopped the item")
	}
	// The new holder starts its own lease.
	var hb2 api.WorkHeartbeat
	f.heartbeat(f.env.ID, w2.ID, sec2.SessionsToken, api.NoHeartbeat).decode(t, &hb2)
	if hb2.State != api.WorkActive || !hb2.LeaseExtended {
		t.Fatalf("new holder's heartbeat = %+v", hb2)
	}
}

func TestStaleHeartbeatIs412AndChangesNothing(t *testing.T) {
	f := newLeaseFixture(t)
	w, sec := f.poll(f.env.ID, f.key, "a")
	var hb api.WorkHeartbeat
	f.heartbeat(f.env.ID, w.ID, sec.SessionsToken, api.NoHeartbeat).decode(t, &hb)
	f.clock.Advance(10 * time.Second)
	before := f.work(f.env.ID, w.ID)
	for _, expected := range []string{api.NoHeartbeat, "2026-05-01T11:00:00.000000000Z"} {
		r := f.heartbeat(f.env.ID, w.ID, sec.SessionsToken, expected)
		if r.status != http.StatusPreconditionFailed || r.header.Get("x-should-retry") != "false" {
			t.Fatalf("expected %s: %d %s", expected, r.status, r.body)
		}
		var env struct {
			Error struct {
				Type    api.ErrorType                    `json:"type"`
				Details api.HeartbeatPreconditionDetails `json:"details"`
			} `json:"error"`
		}
		r.decode(t, &env)
		// The hosted API's pairing: invalid_request_error with status 412.
		if env.Error.Type != api.InvalidRequest || env.Error.Details.ErrorCode != api.HeartbeatPreconditionFailed {
			t.Fatalf("stale heartbeat error type %q, error_code %q; want %q, %q", env.Error.Type, env.Error.Details.ErrorCode, api.InvalidRequest, api.HeartbeatPreconditionFailed)
		}
		cs := env.Error.Details.CurrentState
		if cs.State != api.WorkActive || cs.LastHeartbeat == nil || *cs.LastHeartbeat != hb.LastHeartbeat || cs.TTLSeconds != api.DefaultLeaseTTLSeconds {
			t.Fatalf("current_state = %+v", cs)
		}
	}
	if after := f.work(f.env.ID, w.ID); !after.LatestHeartbeatAt.Equal(*before.LatestHeartbeatAt) {
		t.Fatal("a refused heartbeat moved the lease")
	}
	// The right expectation renews, with the TTL asked for (clamped).
	r := f.call("POST", f.workPath(w.ID, "/heartbeat?expected_last_heartbeat="+hb.LastHeartbeat+"&desired_ttl_seconds=1"), sec.SessionsToken, nil)
	var hb2 api.WorkHeartbeat
	r.decode(t, &hb2)
	if r.status != 200 || hb2.TTLSeconds != api.MinLeaseTTLSeconds || hb2.LastHeartbeat == hb.LastHeartbeat {
		t.Fatalf("renewal = %d %+v", r.status, hb2)
	}
}

func TestGracefulStopIsSeenOnTheNextHeartbeat(t *testing.T) {
	f := newLeaseFixture(t)
	w, sec := f.poll(f.env.ID, f.key, "a")
	f.must(200, "POST", f.workPath(w.ID, "/ack"), f.key, nil, nil)
	var hb api.WorkHeartbeat
	f.heartbeat(f.env.ID, w.ID, sec.SessionsToken, api.NoHeartbeat).decode(t, &hb)

	r := f.must(204, "POST", f.workPath(w.ID, "/stop"), f.apiKey, api.StopWorkRequest{}, nil)
	if len(r.body) != 0 {
		t.Fatalf("204 with a body: %s", r.body)
	}
	got := f.work(f.env.ID, w.ID)
	if got.State != api.WorkStopping || got.StopRequestedAt == nil || got.StoppedAt != nil {
		t.Fatalf("after a graceful stop: %+v", got)
	}
	// The worker learns it on its next beat, even with a stale expectation,
	// and its token keeps working for the final sync.
	var hb2 api.WorkHeartbeat
	f.heartbeat(f.env.ID, w.ID, sec.SessionsToken, "whatever").decode(t, &hb2)
	if hb2.State != api.WorkStopping || !hb2.LeaseExtended {
		t.Fatalf("heartbeat while stopping = %+v", hb2)
	}
	f.must(200, "GET", "/v1/sessions/"+f.sess.ID, sec.SessionsToken, nil, nil)
	// It then force-stops the item itself; a second stop is a 409.
	f.must(204, "POST", f.workPath(w.ID, "/stop"), sec.SessionsToken, api.StopWorkRequest{Force: true}, nil)
	if got := f.work(f.env.ID, w.ID); got.State != api.WorkStopped || got.StoppedAt == nil {
		t.Fatalf("after the worker's forced stop: %+v", got)
	}
	if r := f.call("POST", f.workPath(w.ID, "/stop"), sec.SessionsToken, api.StopWorkRequest{Force: true}); r.status != 409 || r.errType() != string(api.Conflict) {
		t.Fatalf("second stop: %d %s", r.status, r.body)
	}
}

func TestForcedStopEndsTheLeaseAtOnce(t *testing.T) {
	f := newLeaseFixture(t)
	w, sec := f.poll(f.env.ID, f.key, "a")
	var hb api.WorkHeartbeat
	f.heartbeat(f.env.ID, w.ID, sec.SessionsToken, api.NoHeartbeat).decode(t, &hb)

	f.must(204, "POST", f.workPath(w.ID, "/stop"), f.key, api.StopWorkRequest{Force: true}, nil)
	if got := f.work(f.env.ID, w.ID); got.State != api.WorkStopped || got.StoppedAt == nil || got.StopRequestedAt == nil {
		t.Fatalf("after a forced stop: %+v", got)
	}
	// The heartbeat reports it (no 412), and nothing else works with the
	// token any more.
	var hb2 api.WorkHeartbeat
	f.heartbeat(f.env.ID, w.ID, sec.SessionsToken, hb.LastHeartbeat).decode(t, &hb2)
	if hb2.State != api.WorkStopped || hb2.LeaseExtended || hb2.TTLSeconds != 0 {
		t.Fatalf("heartbeat after a forced stop = %+v", hb2)
	}
	if r := f.call("GET", "/v1/sessions/"+f.sess.ID, sec.SessionsToken, nil); r.status != 403 || r.errType() != string(api.Permission) {
		t.Fatalf("token of a stopped item read its session: %d %s", r.status, r.body)
	}
	// A stopped item is never handed out again.
	if again, _ := f.poll(f.env.ID, f.key, "b"); again != nil {
		t.Fatalf("a stopped item was claimed: %+v", again)
	}
	if r := f.call("POST", f.workPath(w.ID, "/stop"), f.apiKey, nil); r.status != 409 {
		t.Fatalf("stopping a stopped item: %d", r.status)
	}
}

func TestStopOfAnUnclaimedItemStopsItAtOnce(t *testing.T) {
	f := newLeaseFixture(t)
	id := f.workID()
	f.must(204, "POST", f.workPath(id, "/stop"), f.apiKey, nil, nil)
	if got := f.work(f.env.ID, id); got.State != api.WorkStopped {
		t.Fatalf("graceful stop of a queued item: %+v", got)
	}
}

func TestUnackedClaimIsReclaimedAfterReclaimOlderThan(t *testing.T) {
	f := newLeaseFixture(t)
	w, _ := f.poll(f.env.ID, f.key, "a")
	if again, _ := f.poll(f.env.ID, f.key, "b"); again != nil {
		t.Fatal("a fresh claim was handed out again")
	}
	f.clock.Advance(2 * time.Second)
	if again, _ := f.poll(f.env.ID, f.key, "b", "reclaim_older_than_ms", "1000"); again == nil || again.ID != w.ID {
		t.Fatalf("reclaim_older_than_ms=1000 after 2 s: %+v", again)
	}
	// Without the parameter the hosted default of 5 s applies.
	f.clock.Advance(4 * time.Second)
	if again, _ := f.poll(f.env.ID, f.key, "c"); again != nil {
		t.Fatal("reclaimed after 4 s with the 5 s default")
	}
	f.clock.Advance(time.Second)
	if again, _ := f.poll(f.env.ID, f.key, "c"); again == nil || again.ID != w.ID {
		t.Fatalf("not reclaimed after 5 s: %+v", again)
	}
	// Acked, it is no longer offered.
	f.must(200, "POST", f.workPath(w.ID, "/ack"), f.key, nil, nil)
	f.clock.Advance(10 * time.Second)
	if again, _ := f.poll(f.env.ID, f.key, "d", "reclaim_older_than_ms", "1"); again != nil {
		t.Fatal("an acknowledged item was reclaimed")
	}
}

func TestQueueStats(t *testing.T) {
	f := newLeaseFixture(t)
	f.clock.Advance(time.Second)
	f.session(f.env.ID, f.sess.Agent.ID, nil)
	var st api.WorkQueueStats
	f.must(200, "GET", "/v1/environments/"+f.env.ID+"/work/stats", f.key, nil, &st)
	if st.Type != "work_queue_stats" || st.Depth != 2 || st.Pending != 0 || st.WorkersPolling != 0 || st.OldestQueuedAt == nil || !st.OldestQueuedAt.Equal(f.sess.CreatedAt) {
		t.Fatalf("stats = %+v", st)
	}
	f.poll(f.env.ID, f.key, "worker-a")
	f.poll(f.env.ID, f.key, "worker-b")
	f.poll(f.env.ID, f.key, "worker-a")
	f.must(200, "GET", "/v1/environments/"+f.env.ID+"/work/stats", f.key, nil, &st)
	if st.Depth != 0 || st.Pending != 2 || st.WorkersPolling != 2 {
		t.Fatalf("stats after two claims by two workers = %+v", st)
	}
	f.clock.Advance(api.WorkersPollingWindow + time.Second)
	f.must(200, "GET", "/v1/environments/"+f.env.ID+"/work/stats", f.apiKey, nil, &st)
	if st.WorkersPolling != 0 {
		t.Fatalf("workers_polling 31 s later = %d", st.WorkersPolling)
	}
}

func TestWorkMetadataPatchAndList(t *testing.T) {
	f := newLeaseFixture(t)
	id := f.workID()
	var w api.Work
	f.must(200, "POST", f.workPath(id, ""), f.apiKey, map[string]any{"metadata": map[string]any{"a": "1", "b": "2"}}, &w)
	var w2 api.Work
	f.must(200, "POST", f.workPath(id, ""), f.apiKey, map[string]any{"metadata": map[string]any{"a": nil}}, &w2)
	if w := w2; len(w.Metadata) != 1 || w.Metadata["b"] != "2" {
		t.Fatalf("metadata = %v", w.Metadata)
	}
}

// waitForPoller returns once a long poll of env is waiting on the queue's
// wake-up (it registers before it looks at the queue, and looks again
// after each wake, so a session created from here on is seen).
func (f *leaseFixture) waitForPoller(env string) {
	f.t.Helper()
	for i := 0; ; i++ {
		if f.app.Work.PollWaiting(env) {
			return
		}
		if i == 10000 {
			f.t.Fatal("no poll is waiting")
		}
		time.Sleep(time.Millisecond)
	}
}

// desired_ttl_seconds is the lease a heartbeat asks for: a 120 s lease
// holds past the default 60 s and lapses after 120 s; more than the
// maximum gets the maximum (the minimum is in TestStaleHeartbeatIs412AndChangesNothing).
func TestHeartbeatLeaseIsTheDesiredTTLWithinBounds(t *testing.T) {
	f := newLeaseFixture(t)
	w, sec := f.poll(f.env.ID, f.key, "a")
	f.must(200, "POST", f.workPath(w.ID, "/ack"), f.key, nil, nil)
	var hb api.WorkHeartbeat
	f.must(200, "POST", f.workPath(w.ID, "/heartbeat?expected_last_heartbeat="+api.NoHeartbeat+"&desired_ttl_seconds=120"), sec.SessionsToken, nil, &hb)
	if hb.TTLSeconds != 120 || !hb.LeaseExtended {
		t.Fatalf("heartbeat asking for 120 s = %+v", hb)
	}
	f.clock.Advance(119 * time.Second)
	if again, _ := f.poll(f.env.ID, f.key, "b"); again != nil {
		t.Fatalf("a 120 s lease lapsed after 119 s: %+v", again)
	}
	f.clock.Advance(2 * time.Second)
	w2, sec2 := f.poll(f.env.ID, f.key, "b")
	if w2 == nil || w2.ID != w.ID {
		t.Fatalf("a 120 s lease still held after 121 s: %+v", w2)
	}
	f.must(200, "POST", f.workPath(w.ID, "/heartbeat?expected_last_heartbeat="+api.NoHeartbeat+"&desired_ttl_seconds=86400"), sec2.SessionsToken, nil, &hb)
	if hb.TTLSeconds != api.MaxLeaseTTLSeconds {
		t.Fatalf("heartbeat asking for a day got %d s, want the maximum %d", hb.TTLSeconds, api.MaxLeaseTTLSeconds)
	}
}
