package main

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/testlog"
)

// receivedSpan is one span an OTLP receiver was sent.
type receivedSpan struct {
	service, name, traceID string
	attrs                  map[string]string
}

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes each export
// request (protobuf, gzip or not) as a collector would and keeps its spans.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []receivedSpan
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want a protobuf POST to /v1/traces", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				attrs := map[string]string{}
				for _, kv := range s.Attributes {
					attrs[kv.Key] = kv.GetValue().GetStringValue()
				}
				o.spans = append(o.spans, receivedSpan{service: service, name: s.Name, traceID: hex.EncodeToString(s.TraceId), attrs: attrs})
			}
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func (o *otlpReceiver) received() []receivedSpan {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.spans)
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, a real `memstore worker poll` and
// the server it serves export their spans over OTLP/HTTP to a receiver
// that decodes them as a collector does: the worker's work_item span names
// the session, its tool calls follow, and the server's request spans are
// in the same trace.
func TestWorkerAndServerExportTracesOverOTLP(t *testing.T) {
	bin := memstoreBinary(t)
	recv := &otlpReceiver{}
	collector := httptest.NewServer(recv)
	t.Cleanup(collector.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	s := newWorkerSetup(t)
	store, err := s.admin.CreateMemoryStore(context.Background(), api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	sess := s.session(t, `{"tool_calls":[`+
		`{"name":"write","input":{"file_path":"/mnt/memory/notes/a.md","content":"traced\n"}},`+
		`{"name":"bash","input":{"command":"true"}}],"end":"terminate"}`,
		api.SessionResourceParams{Type: api.ResourceMemoryStore, MemoryStoreID: store.ID})

	var out testlog.Buffer
	cmd := exec.Command(bin, "worker", "poll", "--mount-root", t.TempDir(), "--sandbox", "none")
	cmd.Env = s.workerEnv(t.TempDir())
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitUntil(t, "the item to stop", func() bool { return s.work(t, sess.ID).State == api.WorkStopped })
	// SIGTERM flushes the worker's last spans before it exits.
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the worker exited with %v:\n%s", err, out.String())
	}

	var root receivedSpan
	waitWithin(t, 10*time.Second, "the work item's span and a server span in its trace", func() bool {
		spans := recv.received()
		for _, sp := range spans {
			if sp.name == "work_item" && sp.attrs["memstore.session_id"] == sess.ID {
				root = sp
			}
		}
		return root.traceID != "" && slices.ContainsFunc(spans, func(sp receivedSpan) bool {
			return sp.service == "memstore-server" && sp.traceID == root.traceID && sp.name == "POST /v1/sessions/{session}/events"
		})
	})
	if root.service != "memstore-worker" {
		t.Errorf("the work_item span came from service %q, want memstore-worker", root.service)
	}
	var tools []string
	for _, sp := range recv.received() {
		if sp.traceID == root.traceID && sp.name == "tool_call" {
			tools = append(tools, sp.attrs["memstore.tool.name"])
		}
	}
	if !slices.Equal(tools, []string{"write", "bash"}) {
		t.Errorf("tool_call spans in the item's trace = %q, want write then bash", tools)
	}
}
