package worker

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/telemetry"
	"github.com/memstore/memstore/internal/toolset"
	"github.com/memstore/memstore/memsync"
)

// Each work item is one trace: a root span "work_item" (with the session,
// work and environment ids) from the poll that claimed it to its
// force-stop, and under it "claim" (the poll and the ack), "mount", one
// "tool_call" per call the agent made, one "memory.sync" per store and
// sync step, and "teardown". The worker's requests carry the span they
// are made under (W3C traceparent), so a server that traces its requests,
// as memstore's does, puts them in the same trace.

// Span attribute keys, the log's keys under memstore's namespace.
const (
	attrSessionID     = attribute.Key("memstore.session_id")
	attrWorkID        = attribute.Key("memstore.work_id")
	attrEnvironmentID = attribute.Key("memstore.environment_id")
	attrMemoryStoreID = attribute.Key("memstore.memory_store_id")
	attrWorkerID      = attribute.Key("memstore.worker_id")
)

// tracerName names the worker's spans' instrumentation scope.
const tracerName = "github.com/memstore/memstore/worker"

// newTracer is the worker's tracer: Config.TracerProvider's, or one that
// records nothing.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// tracePropagation returns c with each request carrying the span of its
// context.
func tracePropagation(c *client.Client) *client.Client {
	hc := *c.HTTPClient()
	hc.Transport = telemetry.Transport(hc.Transport)
	return c.With(client.WithHTTPClient(&hc))
}

// claimTimes is when the poll that claimed an item started and when its
// ack returned, kept from the claim until the item's trace starts.
type claimTimes struct{ polled, acked time.Time }

// noteClaim records the claim of work, which began at polled.
func (w *Worker) noteClaim(work *api.Work, polled time.Time) {
	if work == nil || w.cfg.OnWork != nil {
		return
	}
	w.mu.Lock()
	w.claims[work.ID] = claimTimes{polled, time.Now()}
	w.mu.Unlock()
}

// startItemSpan starts the item's trace: its root span, from the claim's
// poll when this worker claimed it (with a "claim" span under it), else
// from now. end ends the root span with the item's outcome.
func (w *Worker) startItemSpan(ctx context.Context, work api.Work) (context.Context, func(err error)) {
	w.mu.Lock()
	claim, claimed := w.claims[work.ID]
	delete(w.claims, work.ID)
	w.mu.Unlock()
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attrSessionID.String(work.Data.ID), attrWorkID.String(work.ID),
		attrEnvironmentID.String(work.EnvironmentID), attrWorkerID.String(w.cfg.WorkerID))}
	if claimed {
		opts = append(opts, trace.WithTimestamp(claim.polled))
	}
	ctx, span := w.tracer.Start(ctx, "work_item", opts...)
	if claimed {
		_, c := w.tracer.Start(ctx, "claim", trace.WithTimestamp(claim.polled))
		c.End(trace.WithTimestamp(claim.acked))
	}
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// synced is the memory's OnSync for one item: the worker's metrics, and a
// "memory.sync" span under ctx's for the step just done.
func (w *Worker) synced(ctx context.Context) func(memsync.SyncReport) {
	return func(r memsync.SyncReport) {
		w.metrics.synced(r)
		end := time.Now()
		_, span := w.tracer.Start(ctx, "memory.sync", trace.WithTimestamp(end.Add(-r.Duration)), trace.WithAttributes(
			attrMemoryStoreID.String(r.MemoryStoreID),
			attribute.String("memstore.sync.step", r.Step),
			attribute.Int("memstore.sync.changes", r.Changes),
			attribute.Int("memstore.sync.failed", r.Failed),
			attribute.Int("memstore.sync.conflicts", r.Conflicts),
			attribute.Int64("memstore.sync.bytes_uploaded", r.BytesUploaded),
			attribute.Int64("memstore.sync.bytes_downloaded", r.BytesDownloaded)))
		if r.Failed > 0 {
			span.SetStatus(codes.Error, "some changes failed")
		}
		span.End(trace.WithTimestamp(end))
	}
}

// callSpan starts the span of one tool call; end closes it with the
// call's result.
func (r *runner) callSpan(ctx context.Context, c *call) (end func(toolset.Result)) {
	if r.tracer == nil {
		return func(toolset.Result) {}
	}
	_, span := r.tracer.Start(ctx, "tool_call", trace.WithAttributes(
		attribute.String("memstore.tool.name", c.name), attribute.String("memstore.tool.use_id", c.id)))
	return func(res toolset.Result) {
		span.SetAttributes(attribute.Bool("memstore.tool.is_error", res.IsError))
		if res.IsError {
			span.SetStatus(codes.Error, "the tool call failed")
		}
		span.End()
	}
}
