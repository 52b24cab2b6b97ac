package sandbox_test

import (
	"os"
	"strings"
	"testing"

	"github.com/memstore/memstore/sandbox"
)

// --sandbox-env refuses what it cannot pass, saying why.
func TestParseEnvRefusals(t *testing.T) {
	t.Setenv("SET_IN_WORKER", "v")
	os.Unsetenv("NOT_SET_ANYWHERE")
	for in, want := range map[string]string{
		"NOT_SET_ANYWHERE": "is not set in the worker's environment",
		"HOME":             "cannot be passed",
		"HOME=/":           "cannot be passed",
		"1BAD":             "write NAME or NAME=value",
		"":                 "write NAME or NAME=value",
		"A B=c":            "write NAME or NAME=value",
	} {
		if _, err := sandbox.ParseEnv(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseEnv(%q) = %v, want %q", in, err, want)
		}
	}
	if kv, err := sandbox.ParseEnv("SET_IN_WORKER"); err != nil || kv != "SET_IN_WORKER=v" {
		t.Errorf("ParseEnv(SET_IN_WORKER) = %q, %v", kv, err)
	}
	if kv, err := sandbox.ParseEnv("X=a=b"); err != nil || kv != "X=a=b" {
		t.Errorf("ParseEnv(X=a=b) = %q, %v", kv, err)
	}
}
