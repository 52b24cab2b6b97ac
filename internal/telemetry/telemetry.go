// Package telemetry sets up OpenTelemetry tracing for memstore's server and
// worker from the standard OTEL_* environment variables: spans are exported
// with OTLP over HTTP when OTEL_EXPORTER_OTLP_ENDPOINT (or its
// traces-only form) is set, and not recorded at all otherwise, so a host
// without a collector pays nothing for them.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Enabled reports whether the environment asks for traces to be exported.
func Enabled(getenv func(string) string) bool {
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Tracing returns the tracer provider a process named service uses, and
// what flushes and stops it on exit. Without an OTLP endpoint in the
// environment it is a no-op provider. The exporter reads the rest of its
// settings (headers, protocol timeout, TLS) from the OTEL_EXPORTER_OTLP_*
// variables; only HTTP with protobuf is spoken.
func Tracing(ctx context.Context, service string) (trace.TracerProvider, func(context.Context) error, error) {
	if !Enabled(os.Getenv) {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	if p := os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"); p != "" && p != "http/protobuf" {
		return nil, nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%s: memstore exports traces over http/protobuf only; unset it or set it to http/protobuf, and point OTEL_EXPORTER_OTLP_ENDPOINT at the collector's HTTP port (4318)", p)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("the OTLP trace exporter could not be set up from OTEL_EXPORTER_OTLP_* (%w); fix those variables or unset OTEL_EXPORTER_OTLP_ENDPOINT to run without traces", err)
	}
	return NewProvider(service, sdktrace.WithBatcher(exp))
}

// NewProvider is a tracer provider for service with the given span
// processors (a batcher over an exporter; tests use a synchronous one),
// its resource carrying service.name and what OTEL_RESOURCE_ATTRIBUTES
// adds.
func NewProvider(service string, opts ...sdktrace.TracerProviderOption) (trace.TracerProvider, func(context.Context) error, error) {
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", service)))
	if err != nil && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, nil, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{sdktrace.WithResource(res)}, opts...)...)
	return tp, tp.Shutdown, nil
}

// Extract returns ctx with the remote span the request's W3C traceparent
// header names, if any: the caller's span, which the server's request span
// joins.
func Extract(ctx context.Context, h http.Header) context.Context {
	return propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(h))
}

// Transport returns base with each request carrying its context's span
// (W3C traceparent), for clients whose callers' traces the server should
// join.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return injecting{base}
}

type injecting struct{ base http.RoundTripper }

func (t injecting) RoundTrip(r *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(r.Context()).IsValid() {
		return t.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	propagation.TraceContext{}.Inject(r.Context(), propagation.HeaderCarrier(r.Header))
	return t.base.RoundTrip(r)
}
