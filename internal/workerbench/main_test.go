package workerbench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// officialRole is the value of roleVar that makes this test binary an
// official worker: the benchmarks start it that way, once per process of
// the official fleet, since the SDK offers its worker as a library only.
const (
	roleVar      = "WORKERBENCH_ROLE"
	officialRole = "official-worker"
)

func TestMain(m *testing.M) {
	if os.Getenv(roleVar) == officialRole {
		os.Exit(runOfficialWorker())
	}
	os.Exit(m.Run())
}

// runOfficialWorker serves the environment named in ANTHROPIC_* variables
// with the SDK's EnvironmentWorker until SIGTERM.
func runOfficialWorker() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	sdk := anthropic.NewClient(option.WithBaseURL(os.Getenv("ANTHROPIC_BASE_URL")), option.WithAPIKey("unused"))
	w := environments.NewEnvironmentWorker(sdk, environments.EnvironmentWorkerOptions{
		EnvironmentID: os.Getenv("ANTHROPIC_ENVIRONMENT_ID"), EnvironmentKey: os.Getenv("ANTHROPIC_ENVIRONMENT_KEY"),
		WorkerID: os.Getenv("WORKERBENCH_WORKER_ID"), Workdir: os.Getenv("ANTHROPIC_WORKDIR"),
		MemorySyncInterval: 5 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err := w.Run(ctx); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "official worker:", err)
		return 1
	}
	return 0
}
