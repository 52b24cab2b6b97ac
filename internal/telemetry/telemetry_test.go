package telemetry

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace/noop"
)

// Without an endpoint nothing is recorded; a protocol memstore does not
// speak is refused at start with what to set instead.
func TestTracingFollowsTheEnvironment(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	tp, stop, err := Tracing(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tp.(noop.TracerProvider); !ok {
		t.Errorf("without an endpoint the provider is %T, want the no-op one", tp)
	}
	stop(context.Background())

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	if _, _, err := Tracing(context.Background(), "test"); err == nil || !strings.Contains(err.Error(), "set it to http/protobuf") {
		t.Errorf("grpc protocol: err = %v, want a refusal saying what to set", err)
	}
}
