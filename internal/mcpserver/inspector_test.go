package mcpserver_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testenv"
	"github.com/memstore/memstore/internal/testserver"
)

// inspectorVar names the MCP Inspector's executable; .ci/run installs the
// Inspector (npm install --prefix) and sets it.
const inspectorVar = "MEMSTORE_MCP_INSPECTOR"

// inspector returns the MCP Inspector's executable. Without one it skips t
// saying how to get it, or fails t under CI, which must run it.
func inspector(t *testing.T) string {
	t.Helper()
	// Each Inspector call starts Node (seconds each): the long run, which
	// .ci/run makes with the Inspector installed, runs it.
	testenv.Long(t)
	if bin := os.Getenv(inspectorVar); bin != "" {
		return bin
	}
	msg := "MCP Inspector test SKIPPED: set " + inspectorVar + " to the Inspector's executable (npm install --prefix /tmp/mcp-inspector @modelcontextprotocol/inspector@0.17.5; then /tmp/mcp-inspector/node_modules/.bin/mcp-inspector), as .ci/run does"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// inspect runs the Inspector in CLI mode with args and returns its output.
func inspect(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--cli"}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// A client nobody here wrote, the MCP Inspector, against /mcp with a key
// and against `memstore mcp` over stdio: it sees the eight tools, its
// writes are versions the REST API reads back, and without a key it is
// refused and writes nothing.
func TestMCPInspectorAgainstTheServer(t *testing.T) {
	bin := inspector(t)
	ctx := context.Background()
	srv := testserver.Start(t, testserver.Options{})
	admin := srv.Admin(t)
	st, err := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "inspected"})
	if err != nil {
		t.Fatal(err)
	}
	memstore := filepath.Join(t.TempDir(), "memstore")
	if out, err := exec.Command("go", "build", "-o", memstore, "github.com/memstore/memstore/cmd/memstore").CombinedOutput(); err != nil {
		t.Fatalf("build memstore: %v\n%s", err, out)
	}
	roads := []struct {
		name   string
		target []string
	}{
		{"http", []string{srv.URL + "/mcp", "--transport", "http", "--header", "x-api-key: " + srv.AdminKey}},
		{"stdio", []string{"-e", "MEMSTORE_BASE_URL=" + srv.URL, "-e", "MEMSTORE_API_KEY=" + srv.AdminKey, memstore, "mcp"}},
	}
	for _, road := range roads {
		t.Run(road.name, func(t *testing.T) {
			run := func(args ...string) string {
				t.Helper()
				out, err := inspect(t, bin, append(append([]string{}, road.target...), args...)...)
				if err != nil {
					t.Fatalf("inspector %v: %v\n%s", args, err, out)
				}
				return out
			}
			out := run("--method", "tools/list")
			for _, name := range []string{"memory_list_stores", "memory_view", "memory_create", "memory_str_replace", "memory_insert", "memory_delete", "memory_rename", "memory_search"} {
				if !strings.Contains(out, `"`+name+`"`) {
					t.Fatalf("tools/list does not list %s:\n%s", name, out)
				}
			}
			p := "/" + road.name + ".md"
			word := "quokka" + road.name
			run("--method", "tools/call", "--tool-name", "memory_create", "--tool-arg", "store="+st.ID, "--tool-arg", "path="+p, "--tool-arg", "file_text=The "+word+" lives on Rottnest.")
			m := memoryAt(t, admin, st.ID, p)
			run("--method", "tools/call", "--tool-name", "memory_str_replace", "--tool-arg", "store=inspected", "--tool-arg", "path="+p, "--tool-arg", "old_str=Rottnest", "--tool-arg", "new_str=Rottnest Island")
			versions, err := admin.ListMemoryVersions(ctx, st.ID, client.ListMemoryVersionsParams{MemoryID: m.ID})
			if err != nil || len(versions.Data) != 2 {
				t.Fatalf("after memory_str_replace: %v versions, err %v; want 2", versions, err)
			}
			if out := run("--method", "tools/call", "--tool-name", "memory_view", "--tool-arg", "store="+st.ID, "--tool-arg", "path="+p); !strings.Contains(out, "Rottnest Island") {
				t.Fatalf("memory_view:\n%s", out)
			}
			if out := run("--method", "tools/call", "--tool-name", "memory_search", "--tool-arg", "query="+strings.ToUpper(word)); !strings.Contains(out, p) {
				t.Fatalf("memory_search for %s:\n%s", word, out)
			}
		})
	}

	before := len(memories(t, admin, st.ID))
	refused := []struct {
		name   string
		target []string
	}{
		{"http without a key", []string{srv.URL + "/mcp", "--transport", "http"}},
		{"stdio without a key", []string{"-e", "MEMSTORE_BASE_URL=" + srv.URL, "-e", "MEMSTORE_API_KEY=sk-not-a-key", memstore, "mcp"}},
	}
	for _, r := range refused {
		args := append(append([]string{}, r.target...), "--method", "tools/call", "--tool-name", "memory_create", "--tool-arg", "store="+st.ID, "--tool-arg", "path=/refused.md", "--tool-arg", "file_text=x")
		if out, err := inspect(t, bin, args...); err == nil {
			t.Errorf("%s: the Inspector's memory_create succeeded:\n%s", r.name, out)
		}
	}
	if after := len(memories(t, admin, st.ID)); after != before {
		t.Fatalf("refused requests wrote: %d memories, were %d", after, before)
	}
}

// memoryAt is the memory at path p, through the REST API.
func memoryAt(t *testing.T, admin *client.Client, storeID, p string) api.Memory {
	t.Helper()
	for _, m := range memories(t, admin, storeID) {
		if m.Path == p {
			return m
		}
	}
	t.Fatalf("the REST API lists no memory at %s", p)
	return api.Memory{}
}
