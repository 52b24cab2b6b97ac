package worker

import (
	"slices"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/testlog"
	"github.com/memstore/memstore/internal/testserver"
)

// spanAttr is the value of a span's attribute key, "" without it.
func spanAttr(s sdktrace.ReadOnlySpan, key attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// A session served by the poll loop, with the worker and the server on one
// tracer provider, is one trace: the root "work_item" names the session
// and the item, and under it are the claim, the mount, one span per tool
// call (with its name and outcome), one per sync step of the store, and
// the teardown; the server's request spans for that session's calls sit
// in the same trace, under the worker's spans they were made in.
func TestEachWorkItemIsOneTraceWithItsPhases(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	f := newFixtureWith(t, startServerWith(t, testserver.Options{TracerProvider: tp}), testserver.ScriptedAgent())
	cfg := f.memoryConfig(&testlog.Buffer{})
	cfg.TracerProvider = tp
	notes := f.memStore("Notes", map[string]string{"/a.md": "hello\n"})
	sess := f.session(script(api.ScriptEndTerminate,
		toolCall("read", map[string]any{"file_path": "/mnt/memory/notes/a.md"}),
		toolCall("write", map[string]any{"file_path": "/mnt/memory/notes/b.md", "content": "new\n"}),
		toolCall("bash", map[string]any{"command": "exit 3"}),
	), attach(notes, api.AccessReadWrite))

	stop := runWorker(t, f.worker(cfg))
	waitFor(t, "the session to end and its item to stop", func() bool {
		return f.getSession(sess.ID).Status == api.SessionTerminated && f.sessionWork(sess.ID).State == api.WorkStopped
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	spans := rec.Ended()
	var root sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == "work_item" {
			if root != nil {
				t.Fatalf("two work_item spans for one item")
			}
			root = s
		}
	}
	if root == nil {
		t.Fatalf("no work_item span among %d spans", len(spans))
	}
	if spanAttr(root, attrSessionID) != sess.ID || spanAttr(root, attrWorkID) != f.sessionWork(sess.ID).ID || spanAttr(root, attrEnvironmentID) != f.env.ID {
		t.Errorf("work_item attributes = %v, want the session, its item and the environment", root.Attributes())
	}
	if root.Parent().IsValid() {
		t.Errorf("work_item has a parent %v; each item starts a trace of its own", root.Parent())
	}
	traceID := root.SpanContext().TraceID()
	children := map[string][]sdktrace.ReadOnlySpan{}
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
		if s.SpanContext().TraceID() == traceID && s.Parent().SpanID() == root.SpanContext().SpanID() {
			children[s.Name()] = append(children[s.Name()], s)
		}
	}
	for name, want := range map[string]int{"claim": 1, "mount": 1, "tool_call": 3, "teardown": 1} {
		if got := len(children[name]); got != want {
			t.Errorf("%d %q spans under work_item, want %d", got, name, want)
		}
	}
	var tools []string
	for _, s := range children["tool_call"] {
		tools = append(tools, spanAttr(s, "memstore.tool.name")+":"+spanAttr(s, "memstore.tool.is_error"))
	}
	if want := []string{"read:false", "write:false", "bash:true"}; !slices.Equal(tools, want) {
		t.Errorf("tool_call spans = %q, want %q", tools, want)
	}
	if c := children["claim"]; len(c) == 1 && c[0].StartTime() != root.StartTime() {
		t.Errorf("the claim starts at %v, the work item at %v: the trace should start at the poll", c[0].StartTime(), root.StartTime())
	}
	var steps []string
	for _, s := range children["memory.sync"] {
		if spanAttr(s, attrMemoryStoreID) != notes.ID {
			t.Errorf("a memory.sync span names store %q, want %s", spanAttr(s, attrMemoryStoreID), notes.ID)
		}
		steps = append(steps, spanAttr(s, "memstore.sync.step"))
	}
	for _, step := range []string{"mount", "final"} {
		if !slices.Contains(steps, step) {
			t.Errorf("memory.sync steps = %q, want one %q", steps, step)
		}
	}

	// The server's side: its request spans for this session are in the
	// item's trace, each under a span of the worker.
	var served []string
	for _, s := range spans {
		if s.SpanKind() != trace.SpanKindServer || s.SpanContext().TraceID() != traceID {
			continue
		}
		served = append(served, s.Name())
		if p, ok := byID[s.Parent().SpanID()]; !ok || p.SpanKind() == trace.SpanKindServer {
			t.Errorf("server span %q is not under a worker span", s.Name())
		}
	}
	for _, route := range []string{"GET /v1/sessions/{session}", "POST /v1/sessions/{session}/events", "POST /v1/environments/{env}/work/{work}/heartbeat", "GET /v1/memory_stores/{store_id}/snapshot"} {
		if !slices.Contains(served, route) {
			t.Errorf("the item's trace lacks the server's %q span; it has %q", route, served)
		}
	}
}
