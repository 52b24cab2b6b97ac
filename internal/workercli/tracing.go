package workercli

import (
	"context"
	"os"

	"go.opentelemetry.io/otel/trace"

	"github.com/memstore/memstore/internal/telemetry"
)

// TracerProvider is the process's tracer provider when
// OTEL_EXPORTER_OTLP_ENDPOINT asks for traces, and nil (no spans, no
// tracing middleware) otherwise; stop flushes what is left.
func TracerProvider(ctx context.Context, service string) (trace.TracerProvider, func(context.Context) error, error) {
	if !telemetry.Enabled(os.Getenv) {
		return nil, func(context.Context) error { return nil }, nil
	}
	return telemetry.Tracing(ctx, service)
}
