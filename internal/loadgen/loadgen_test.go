package loadgen

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testserver"
)

// benchClient is an admin client of srv without retries, as bench uses.
func benchClient(t *testing.T, srv *testserver.Server) *client.Client {
	t.Helper()
	c, err := client.New(srv.URL, client.WithAPIKey(srv.AdminKey), client.WithRetryPolicy(client.RetryPolicy{MaxRetries: 0}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRunMeasuresEveryOperationAndStopsAtItsRequestBound(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	c := benchClient(t, srv)
	ctx := context.Background()
	var phases []string
	// Every operation of the default mix, weighed evenly: with the default
	// weights a run of 400 draws no snapshot (weight 2 in 100) about once
	// in 3,000 runs, and this test asserts each operation was measured.
	var even Mix
	for _, w := range DefaultMix {
		even = append(even, Weight{w.Op, 1})
	}
	rep, err := Run(ctx, Config{Client: c, Duration: time.Minute, Requests: 400, Concurrency: 4, Followers: 2,
		Mix: even, ContentBytes: 200, Progress: func(p Progress) {
			if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
				phases = append(phases, p.Phase)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.StoppedBy != "requests" || rep.Requests != 400 {
		t.Errorf("stopped by %q after %d requests, want the bound of 400", rep.StoppedBy, rep.Requests)
	}
	if rep.ElapsedSeconds >= 60 {
		t.Errorf("elapsed %vs: the request bound did not end the run", rep.ElapsedSeconds)
	}
	var sum int64
	got := map[string]Operation{}
	for _, op := range rep.Operations {
		got[op.Name] = op
		if op.Name != OpEventFanout {
			sum += op.Count + op.Errors
		}
	}
	for _, w := range even {
		op, ok := got[w.Op]
		if !ok || op.Count == 0 {
			t.Errorf("%s: %+v, want successful requests", w.Op, op)
		}
		if op.Errors > 0 {
			t.Errorf("%s failed %d times: %v", w.Op, op.Errors, op.ErrorsByStatus)
		}
		if op.Count > 0 && (op.P50MS <= 0 || op.P50MS > op.P95MS || op.P95MS > op.P99MS || op.P99MS > op.MaxMS) {
			t.Errorf("%s latencies out of order: %+v", w.Op, op)
		}
	}
	if sum != rep.Requests {
		t.Errorf("operations add up to %d requests, the total says %d", sum, rep.Requests)
	}
	// One follower per session: each append reaches one, bar those sent
	// before the followers connected.
	if f, a := got[OpEventFanout], got[OpEventAppend]; f.Count == 0 || f.Count < a.Count/2 || f.Count > a.Count {
		t.Errorf("fan-out deliveries %d for %d appends to 2 followers over 2 sessions", f.Count, a.Count)
	}
	if strings.Join(phases, ",") != "seed,run,cleanup" {
		t.Errorf("progress phases %v", phases)
	}

	// The run's own store, sessions and environments are gone.
	if len(rep.StoreIDs) != 1 {
		t.Fatalf("store ids %v", rep.StoreIDs)
	}
	if _, err := c.GetMemoryStore(ctx, rep.StoreIDs[0]); !client.IsStatus(err, 404) {
		t.Errorf("the run's own store after the run: %v, want 404", err)
	}
	for s, err := range c.ListAllSessions(ctx, api.SessionListParams{}) {
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("session %s (%v) left behind", s.ID, s.Title)
	}
	for e, err := range c.ListAllEnvironments(ctx, api.EnvironmentListParams{}) {
		if err != nil {
			t.Fatal(err)
		}
		if e.ArchivedAt == nil {
			t.Errorf("environment %s (%s) left active", e.ID, e.Name)
		}
	}
}

func TestRunStopsAtItsDurationAndHoldsItsRate(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	gets, err := ParseMix("memory.get=1")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), Config{Client: benchClient(t, srv), Duration: 1500 * time.Millisecond, Requests: 1 << 40,
		Rate: 50, Concurrency: 2, Mix: gets, ContentBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	if rep.StoppedBy != "duration" {
		t.Errorf("stopped by %q, want duration", rep.StoppedBy)
	}
	// At 50 requests a second for 1.5 s, about 75 requests; never hundreds.
	if rep.Requests < 20 || rep.Requests > 90 {
		t.Errorf("%d requests at 50/s over 1.5 s", rep.Requests)
	}

	// Long polls on a store nobody writes to wait their full second; the
	// ones in flight at the deadline are cut, not waited for, and not
	// counted.
	polls, _ := ParseMix("changes.poll=1")
	rep, err = Run(context.Background(), Config{Client: benchClient(t, srv), Duration: 1500 * time.Millisecond, Requests: 1 << 40,
		Concurrency: 2, Mix: polls, ContentBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	if rep.StoppedBy != "duration" || rep.ElapsedSeconds > 1.9 {
		t.Errorf("stopped by %q after %vs, want the 1.5 s duration", rep.StoppedBy, rep.ElapsedSeconds)
	}
	if op := rep.Operations[0]; op.Count != 2 || op.Errors != 0 || op.P50MS < 900 {
		t.Errorf("changes.poll: %+v, want the two polls that ran their full second", op)
	}
}

func TestSeedBuildsTheShapeAndKeepsIt(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	c := benchClient(t, srv)
	ctx := context.Background()
	mix, _ := ParseMix("memory.get=1")
	reuse := Config{Client: c, Duration: 10 * time.Second, Requests: 30, Concurrency: 3, Mix: mix, ContentBytes: 300, ReuseSeed: 10}
	if _, err := Run(ctx, reuse); err == nil || !strings.Contains(err.Error(), "seed one first") {
		t.Fatalf("reusing a seed before any: %v, want a refusal that says to seed first", err)
	}
	rep, err := Run(ctx, Config{Client: c, Duration: 10 * time.Second, Requests: 20, Concurrency: 3, Mix: mix,
		Seed: &Shape{Stores: 2, Memories: 7, Versions: 3, ContentBytes: 300}, ContentBytes: 300})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.StoreIDs) != 2 {
		t.Fatalf("store ids %v, want 2 seeded stores", rep.StoreIDs)
	}
	for _, id := range rep.StoreIDs {
		var mems, versions int
		for m, err := range c.ListAllMemories(ctx, id, client.ListMemoriesParams{}) {
			if err != nil {
				t.Fatal(err)
			}
			mems++
			if m.Memory.ContentSizeBytes != 300 {
				t.Errorf("%s holds %d bytes, want 300", m.Memory.Path, m.Memory.ContentSizeBytes)
			}
		}
		for _, err := range c.ListAllMemoryVersions(ctx, id, client.ListMemoryVersionsParams{}) {
			if err != nil {
				t.Fatal(err)
			}
			versions++
		}
		if mems != 7 || versions != 21 {
			t.Errorf("store %s kept %d memories and %d versions, want 7 and 21", id, mems, versions)
		}
	}

	// A later run measures on the seeded stores, and keeps them; a store an
	// interrupted seed left empty is passed over.
	if _, err := c.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: SeedPrefix + "interrupted-1"}); err != nil {
		t.Fatal(err)
	}
	again, err := Run(ctx, reuse)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(again.StoreIDs, " ") != strings.Join(rep.StoreIDs, " ") && strings.Join(again.StoreIDs, " ") != rep.StoreIDs[1]+" "+rep.StoreIDs[0] {
		t.Errorf("the reusing run measured on %v, want the seeded %v", again.StoreIDs, rep.StoreIDs)
	}
	if op := again.Operations[0]; op.Count != 30 || op.Errors != 0 {
		t.Errorf("memory.get on the seeded stores: %+v, want 30 successful gets", op)
	}
	for _, id := range rep.StoreIDs {
		if _, err := c.GetMemoryStore(ctx, id); err != nil {
			t.Errorf("seeded store %s after a run that reused it: %v", id, err)
		}
	}
}

func TestBadSettingsAreRefusedBeforeAnyRequest(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	c := benchClient(t, srv)
	good := Config{Client: c, Duration: time.Second, Requests: 10, Concurrency: 1, Mix: DefaultMix, ContentBytes: 10}
	for _, tc := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Duration = 0 }, "positive duration"},
		{func(c *Config) { c.Requests = -1 }, "positive number of requests"},
		{func(c *Config) { c.Rate = -5 }, "flat out"},
		{func(c *Config) { c.Concurrency = 0 }, "concurrency 0"},
		{func(c *Config) { c.ContentBytes = api.MaxContentBytes + 1 }, "limit per memory"},
		{func(c *Config) { c.ReuseSeed = -1 }, "reuse-seed -1"},
		{func(c *Config) {
			c.ReuseSeed, c.Seed = 3, &Shape{Stores: 1, Memories: 1, Versions: 1, ContentBytes: 10}
		}, "give one"},
	} {
		cfg := good
		tc.change(&cfg)
		if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run = %v, want an error saying %q", err, tc.want)
		}
	}
	for s, err := range c.ListAllMemoryStores(context.Background(), client.ListMemoryStoresParams{}) {
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("a refused run made store %s", s.ID)
	}
}

func TestParseMixAndShape(t *testing.T) {
	for in, want := range map[string]string{
		"memory.get":                "name=weight",
		"memory.gets=3":             `"memory.gets" is not an operation; use memory.get`,
		"memory.get=x":              "whole number",
		"memory.get=1,memory.get=2": "given twice",
		"memory.get=0":              "every weight is 0",
		"event.fanout=1":            "is not an operation",
	} {
		if _, err := ParseMix(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseMix(%q) = %v, want %q", in, err, want)
		}
	}
	m, err := ParseMix("memory.get=3, work.claim=1")
	if err != nil || len(m) != 2 || m[0] != (Weight{OpMemoryGet, 3}) || m[1] != (Weight{OpWorkClaim, 1}) {
		t.Errorf("ParseMix = %v, %v", m, err)
	}
	for _, in := range []string{"10x10", "0x1x1", "axbxc", "1x1x-1"} {
		if _, err := ParseShape(in, 1); err == nil || !strings.Contains(err.Error(), "STORESxMEMORIESxVERSIONS") {
			t.Errorf("ParseShape(%q) = %v", in, err)
		}
	}
	if s, err := ParseShape("10x1000x5", 64); err != nil || s != (Shape{10, 1000, 5, 64}) {
		t.Errorf("ParseShape = %+v, %v", s, err)
	}
}
