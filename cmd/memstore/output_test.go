package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

// A table shows a line per object with the columns that tell them apart;
// testdata/stores.table is what people see for `store list --output table`.
func TestOutputTableMatchesTheGoldenFile(t *testing.T) {
	at := time.Date(2026, 5, 1, 9, 30, 0, 0, time.UTC)
	desc := "what the team knows, and a description long enough to be cut at the cell's width"
	stores := []api.MemoryStore{
		{ID: "memstore_01AAAAAAAAAAAAAAAAAAAAAAAA", Type: "memory_store", Name: "Team Notes", Description: desc, CreatedAt: at, UpdatedAt: at},
		{ID: "memstore_01BBBBBBBBBBBBBBBBBBBBBBBB", Type: "memory_store", Name: "Handbook", CreatedAt: at, UpdatedAt: at.Add(time.Hour), ArchivedAt: &at},
	}
	var got bytes.Buffer
	if err := printTable(&got, stores); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "stores.table")
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (write it from this output once it is right):\n%s", err, got.String())
	}
	if got.String() != string(want) {
		t.Errorf("the table differs from %s:\ngot:\n%s\nwant:\n%s", golden, got.String(), want)
	}
}

// --output picks the format; a wrong one is refused before anything is
// sent, so nothing is created.
func TestOutputFormatsAndARefusedOne(t *testing.T) {
	rs, _ := cliServer(t)
	conn := []string{"--base-url", rs.baseURL, "--api-key", rs.adminKey}
	var store api.MemoryStore
	decodeOut(t, memstoreCLI(t, 0, append([]string{"store", "create", "notes"}, conn...)...), &store)

	var fromYAML []map[string]any
	if err := yaml.Unmarshal([]byte(memstoreCLI(t, 0, append([]string{"store", "list", "--output", "yaml"}, conn...)...)), &fromYAML); err != nil {
		t.Fatal(err)
	}
	if len(fromYAML) != 1 || fromYAML[0]["id"] != store.ID || fromYAML[0]["name"] != "notes" {
		t.Errorf("store list --output yaml: %v", fromYAML)
	}
	table := memstoreCLI(t, 0, append([]string{"store", "get", store.ID, "--output", "table"}, conn...)...)
	if lines := strings.Split(strings.TrimSpace(table), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "ID ") || !strings.HasPrefix(lines[1], store.ID+" ") {
		t.Errorf("store get --output table:\n%s", table)
	}

	var out, errb bytes.Buffer
	if code := run(context.Background(), append([]string{"store", "create", "other", "--output", "xml"}, conn...), testStreams(&out, &errb)); code != 2 {
		t.Fatalf("--output xml: exit %d, want 2; stderr:\n%s", code, errb.String())
	}
	if !strings.Contains(errb.String(), `--output "xml": use json, table or yaml`) || out.Len() != 0 {
		t.Errorf("--output xml: stdout %q, stderr:\n%s", out.String(), errb.String())
	}
	admin, err := client.New(rs.baseURL, client.WithAPIKey(rs.adminKey))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, err := range admin.ListAllMemoryStores(context.Background(), client.ListMemoryStoresParams{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1 {
		t.Errorf("%d stores after the refused create, want 1", n)
	}
}

// `memstore completion SHELL` writes a script each shell loads, and Tab
// completes ids from the server (one listing request).
func TestCompletionScriptsAndIDsFromTheServer(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "complete -o default -F __start_memstore memstore",
		"zsh":  "#compdef memstore",
		"fish": "complete -c memstore",
	} {
		if out := memstoreCLI(t, 0, "completion", shell); !strings.Contains(out, want) {
			t.Errorf("completion %s lacks %q", shell, want)
		}
	}

	rs, _ := cliServer(t)
	conn := []string{"--base-url", rs.baseURL, "--api-key", rs.adminKey}
	id := strings.TrimSpace(memstoreCLI(t, 0, append([]string{"store", "create", "Team Notes", "-q"}, conn...)...))
	out := memstoreCLI(t, 0, append([]string{"__complete", "memory", "list"}, append(conn, "")...)...)
	if !strings.Contains(out, id+"\tTeam Notes\n") {
		t.Errorf("completing a store id offered:\n%s", out)
	}
	// An unreachable server completes nothing, and says nothing.
	out = memstoreCLI(t, 0, "__complete", "store", "get", "--base-url", "http://127.0.0.1:1", "--api-key", "k", "")
	if strings.Contains(out, "memstore_") {
		t.Errorf("completion without a server offered:\n%s", out)
	}
}

// `memstore version` says which build this is.
func TestVersion(t *testing.T) {
	if out := memstoreCLI(t, 0, "version"); !strings.HasPrefix(out, "memstore ") || !strings.Contains(out, runtime.Version()) {
		t.Errorf("version printed %q", out)
	}
	info := &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2026-05-01T09:30:00Z"}}}
	if got, want := versionLine(info), "memstore v1.2.3 (commit abc123+changes, 2026-05-01T09:30:00Z) go1.26.1"; got != want {
		t.Errorf("versionLine = %q, want %q", got, want)
	}
}

// Every verb's --help has a summary and an example, in the one format the
// usage template gives.
func TestEveryVerbHasHelpWithAnExample(t *testing.T) {
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
		if cmd.HasSubCommands() || !cmd.IsAvailableCommand() || cmd.Parent().Name() == "completion" {
			return // cobra's completion verbs explain themselves in their long help
		}
		if cmd.Short == "" || cmd.Example == "" {
			t.Errorf("%s: no summary or no example for --help", cmd.CommandPath())
		}
	}
	root := newRootCommand(testStreams(io.Discard, io.Discard))
	root.InitDefaultCompletionCmd()
	walk(root)

	help := memstoreCLI(t, 0, "memory", "diff", "--help") // help goes to stderr, nothing to stdout
	if help != "" {
		t.Errorf("--help wrote to stdout: %q", help)
	}
}
