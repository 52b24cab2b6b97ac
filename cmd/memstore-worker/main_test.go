package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/memstore/memstore/internal/testlog"
	"github.com/memstore/memstore/internal/workercli"
)

// The binary is worth having only while it links the worker alone: a
// package of the server side creeping in through an import brings its
// pages back into every idle worker.
func TestTheWorkerBinaryLinksNoneOfTheServer(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !strings.Contains(string(out), "github.com/memstore/memstore/worker\n") {
		t.Fatalf("the worker package is not among the dependencies:\n%s", out)
	}
	for _, d := range deps {
		for _, banned := range []string{"/internal/server", "/internal/console", "/internal/storage", "/internal/app", "/internal/agent", "/internal/mcpserver", "github.com/modelcontextprotocol", "modernc.org/sqlite", "github.com/jackc/pgx"} {
			if strings.Contains(d, banned) {
				t.Errorf("memstore-worker links %s", d)
			}
		}
	}
}

// memstore-worker's verbs are memstore worker's: poll refuses to start
// without an environment, with the flags to pass, and exits 1.
func TestPollWithoutAnEnvironmentSaysWhatToPass(t *testing.T) {
	t.Setenv("ANTHROPIC_ENVIRONMENT_ID", "")
	t.Setenv("ANTHROPIC_ENVIRONMENT_KEY", "")
	var stderr testlog.Buffer
	code := workercli.Execute(context.Background(), newRootCommand(&stderr), []string{"poll", "--sandbox", "none", "--workdir", t.TempDir(), "--mount-root", t.TempDir()}, &stderr)
	if code != 1 {
		t.Errorf("exit %d, want 1; stderr:\n%s", code, stderr.String())
	}
	for _, want := range []string{"memstore-worker poll:", "--environment-id", "--environment-key"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

// A verb it does not have is a usage error (exit 2) that names it.
func TestAnUnknownVerbIsAUsageError(t *testing.T) {
	var stderr testlog.Buffer
	if code := workercli.Execute(context.Background(), newRootCommand(&stderr), []string{"serve"}, &stderr); code != 2 {
		t.Errorf("exit %d, want 2; stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), `unknown verb "serve"`) {
		t.Errorf("stderr does not name the verb:\n%s", stderr.String())
	}
}
