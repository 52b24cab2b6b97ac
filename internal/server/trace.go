package server

import (
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/memstore/memstore/internal/telemetry"
)

// withTrace records a server span per request, named after its route
// (never a raw id), in the trace of the caller's W3C traceparent when it
// sends one: the worker does, so its items' traces hold the server's side
// of each call. It sits inside withAccessLog, whose recorder gives the
// status and whose request log the route.
func (s *Server) withTrace(next http.Handler) http.Handler {
	if s.cfg.TracerProvider == nil {
		return next
	}
	tracer := s.cfg.TracerProvider.Tracer("github.com/memstore/memstore/internal/server")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := telemetry.Extract(r.Context(), r.Header)
		ctx, span := tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
		defer span.End()
		next.ServeHTTP(w, r.WithContext(ctx))
		if rl, ok := r.Context().Value(requestLogKey).(*requestLog); ok {
			if rl.route != "" {
				span.SetName(rl.route)
				span.SetAttributes(attribute.String("http.route", rl.route))
			}
			if rl.credentialID != "" {
				span.SetAttributes(attribute.String("memstore.credential_id", rl.credentialID))
			}
		}
		if rec, ok := w.(*statusRecorder); ok {
			status := rec.status
			if status == 0 {
				status = http.StatusOK
			}
			span.SetAttributes(attribute.Int("http.response.status_code", status))
			if status >= 500 {
				span.SetStatus(codes.Error, strconv.Itoa(status))
			}
		}
	})
}
