package server

import (
	"context"
	"fmt"
	"maps"
	"sync/atomic"
	"testing"

	"github.com/memstore/memstore/internal/storage"
)

// queueReads is a real store that counts the queue reads made of it.
type queueReads struct {
	storage.Store
	depths, stats, lists atomic.Int32
}

func (q *queueReads) QueueDepths(ctx context.Context) ([]storage.QueueDepth, error) {
	q.depths.Add(1)
	return q.Store.QueueDepths(ctx)
}

func (q *queueReads) WorkStats(ctx context.Context, environmentID string) (storage.QueueStats, error) {
	q.stats.Add(1)
	return q.Store.WorkStats(ctx, environmentID)
}

func (q *queueReads) ListEnvironments(ctx context.Context, l storage.ListQuery) ([]storage.Environment, error) {
	q.lists.Add(1)
	return q.Store.ListEnvironments(ctx, l)
}

// A scrape reports every open environment's queue, right, from one read of
// the database however many environments there are.
func TestMetricsReportEveryQueueFromOneRead(t *testing.T) {
	var reads *queueReads
	e := newCPEnv(t, func(c *cpConfig) { reads = &queueReads{Store: c.App.Store}; c.App.Store = reads })
	agent := e.scriptedAgent()
	busy, waiting, idle, archived := e.environment("busy"), e.environment("waiting"), e.environment("idle"), e.environment("archived")
	e.session(busy.ID, agent.ID, nil)
	e.session(busy.ID, agent.ID, nil)
	if w, _ := e.poll(busy.ID, e.envKey(busy.ID), "worker-1"); w == nil {
		t.Fatal("nothing to claim in busy")
	}
	e.session(waiting.ID, agent.ID, nil)
	e.session(archived.ID, agent.ID, nil)
	e.must(200, "POST", "/v1/environments/"+archived.ID+"/archive", e.apiKey, nil, nil)

	reads.depths.Store(0)
	reads.stats.Store(0)
	reads.lists.Store(0)
	families, err := e.srv.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "memstore_work_queue_depth" && f.GetName() != "memstore_work_queue_pending" {
			continue
		}
		for _, m := range f.GetMetric() {
			got[f.GetName()+" "+m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{
		"memstore_work_queue_depth " + busy.ID: 1, "memstore_work_queue_pending " + busy.ID: 1,
		"memstore_work_queue_depth " + waiting.ID: 1, "memstore_work_queue_pending " + waiting.ID: 0,
		"memstore_work_queue_depth " + idle.ID: 0, "memstore_work_queue_pending " + idle.ID: 0,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("queue series = %v\nwant %v (%s archived: no series)", got, want, archived.ID)
	}
	if d, s, l := reads.depths.Load(), reads.stats.Load(), reads.lists.Load(); d != 1 || s != 0 || l != 0 {
		t.Fatalf("one scrape made %d QueueDepths, %d WorkStats and %d ListEnvironments reads; want 1, 0, 0", d, s, l)
	}
}

// BenchmarkMetricsScrape prints the time of one /metrics gathering with
// 1,000 environments on SQLite:
//
//	go test -run '^$' -bench MetricsScrape -benchtime 200x ./internal/server/
func BenchmarkMetricsScrape(b *testing.B) {
	e := newCPEnv(b)
	for i := range 1000 {
		e.environment(fmt.Sprintf("env-%04d", i))
	}
	for b.Loop() {
		if _, err := e.srv.Metrics().Gather(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/scrape")
}
