// Package systemd holds the unit files that run memstore as a service; this
// test checks them with systemd's own verifier.
package systemd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnitsVerify runs systemd-analyze verify on each unit, with the binary
// path pointed at a program that exists, so that any directive systemd does
// not know, or a malformed value, fails the test.
func TestUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian package systemd); the units are not checked")
	}
	units, err := filepath.Glob("*.service")
	if err != nil || len(units) != 2 {
		t.Fatalf("want the two unit files, found %v (%v)", units, err)
	}
	dir := t.TempDir()
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if !strings.Contains(text, "ExecStart=/usr/local/bin/memstore ") {
			t.Fatalf("%s: ExecStart must run /usr/local/bin/memstore, the path the install notes name", u)
		}
		text = strings.ReplaceAll(text, "/usr/local/bin/memstore", "/bin/true")
		if err := os.WriteFile(filepath.Join(dir, u), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range units {
		out, err := exec.Command(analyze, "verify", filepath.Join(dir, u)).CombinedOutput()
		if err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", u, err, out)
		}
	}
}
