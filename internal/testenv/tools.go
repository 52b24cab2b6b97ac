package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// RequirePastaVar, set to 1, turns a test's skip for want of pasta (package
// passt, which gives the sandbox its network) into a failure: CI installs
// it and sets this, so the sandbox's network "on" cannot go unchecked.
const RequirePastaVar = "MEMSTORE_REQUIRE_PASTA"

// Pasta returns the path of pasta. Without it it skips t, or fails it
// when RequirePastaVar is 1.
func Pasta(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("pasta")
	if err == nil {
		return path
	}
	line := fmt.Sprintf("pasta is not installed (apt-get install passt), so the sandbox's own network is not tested: %v", err)
	if os.Getenv(RequirePastaVar) == "1" {
		t.Fatalf("%s=1 but %s", RequirePastaVar, line)
	}
	t.Skip(line)
	return ""
}
