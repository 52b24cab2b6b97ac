package worker

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/testlog"
	"github.com/memstore/memstore/internal/testserver"
)

// One session that reads a memory and writes another moves the counters an
// operator watches, on the worker and on the server, and none of the
// server's series is labelled with a raw id.
func TestMetricsCountASessionAndItsSync(t *testing.T) {
	f := newFixture(t, "")
	logs := &testlog.Buffer{}
	cfg := f.memoryConfig(logs)
	reg := prometheus.NewRegistry()
	cfg.Metrics = reg
	cfg.MaxSessions = 3
	notes := f.memStore("Notes", map[string]string{"/a.md": "hello\n"})
	sess := f.session(script(api.ScriptEndTerminate,
		toolCall("read", map[string]any{"file_path": "/mnt/memory/notes/a.md"}),
		toolCall("write", map[string]any{"file_path": "/mnt/memory/notes/b.md", "content": "new\n"}),
	), attach(notes, api.AccessReadWrite))

	stop := runWorker(t, f.worker(cfg))
	waitFor(t, "the session to end and its item to stop", func() bool {
		return f.getSession(sess.ID).Status == api.SessionTerminated && f.sessionWork(sess.ID).State == api.WorkStopped
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if m := f.memories(notes.ID); m["/b.md"] != "new\n" {
		t.Fatalf("the write did not reach the server: %q", m)
	}

	w := testserver.Scrape(t, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	expect(t, "worker", w, map[string]float64{
		`memstore_worker_items_total{result="ok"}`:                        1,
		`memstore_worker_items_active`:                                    0,
		`memstore_worker_items_limit`:                                     3,
		`memstore_worker_tool_calls_total{is_error="false",tool="read"}`:  1,
		`memstore_worker_tool_calls_total{is_error="false",tool="write"}`: 1,
		`memstore_worker_syncs_total{step="mount"}`:                       1,
		`memstore_worker_sync_bytes_total{direction="down"}`:              float64(len("hello\n")),
		`memstore_worker_sync_bytes_total{direction="up"}`:                float64(len("new\n")),
		`memstore_worker_sync_changes_total{result="failed"}`:             0,
		`memstore_worker_sync_conflicts_total`:                            0,
		`memstore_worker_mount_duration_seconds_count`:                    1,
	})
	if w[`memstore_worker_sync_changes_total{result="done"}`] < 2 {
		t.Errorf("sync changes done = %v, want the download and the upload", w[`memstore_worker_sync_changes_total{result="done"}`])
	}
	if w[`memstore_worker_requests_total{code="200",method="get"}`] == 0 || w[`memstore_worker_request_duration_seconds_count{method="post"}`] == 0 {
		t.Errorf("the worker's requests were not counted:\n%v", w)
	}

	s := testserver.Scrape(t, f.srv.Metrics)
	expect(t, "server", s, map[string]float64{
		`memstore_http_requests_total{code="200",route="POST /v1/sessions"}`:                             1,
		`memstore_work_claims_total{environment_id="` + f.env.ID + `"}`:                                  1,
		`memstore_memory_writes_total{op="create"}`:                                                      2, // the fixture's and the agent's
		`memstore_event_streams_open`:                                                                    0,
		`memstore_work_queue_depth{environment_id="` + f.env.ID + `"}`:                                   0,
		`memstore_http_request_duration_seconds_count{route="GET /v1/sessions/{session}/events/stream"}`: 1,
	})
	for k := range s {
		if strings.HasPrefix(k, "memstore_http_") && (strings.Contains(k, sess.ID) || strings.Contains(k, notes.ID)) {
			t.Errorf("a series is labelled with a raw id: %s", k)
		}
	}
}

// expect checks each series in want against the scrape got.
func expect(t *testing.T, who string, got, want map[string]float64) {
	t.Helper()
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s: %s = %v (present: %v), want %v", who, k, g, ok, v)
		}
	}
	if t.Failed() {
		var keys []string
		for k := range got {
			if strings.HasPrefix(k, "memstore_") {
				keys = append(keys, k)
			}
		}
		t.Logf("%s scrape:\n%s", who, strings.Join(keys, "\n"))
	}
}

// A lease that lapses is counted once, with what became of its item, and
// the item shows in the queue's depth again.
func TestMetricsCountALapsedLease(t *testing.T) {
	f := newFixture(t, "")
	f.session(script(api.ScriptEndTerminate))
	work := f.claim()
	f.srv.clock.advance(10 * time.Minute)
	if w := f.work(work.ID); w.State != api.WorkQueued {
		t.Fatalf("the lapsed item is %s, want queued", w.State)
	}
	f.work(work.ID) // settled already: not counted again
	expect(t, "server", testserver.Scrape(t, f.srv.Metrics), map[string]float64{
		`memstore_work_lease_expiries_total{environment_id="` + f.env.ID + `",state="queued"}`: 1,
		`memstore_work_claims_total{environment_id="` + f.env.ID + `"}`:                        1,
		`memstore_work_queue_depth{environment_id="` + f.env.ID + `"}`:                         1,
	})
}
