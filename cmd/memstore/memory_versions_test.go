package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
)

// A memory can be read by path, its history listed by path (across a
// rename), any version's content printed, and two versions compared.
func TestCLIMemoryByPathVersionsAndDiff(t *testing.T) {
	rs, _ := cliServer(t)
	conn := []string{"--base-url", rs.baseURL, "--api-key", rs.adminKey}
	cli := func(want int, args ...string) string { return memstoreCLI(t, want, append(args, conn...)...) }
	store := strings.TrimSpace(cli(0, "store", "create", "notes", "-q"))
	mem := strings.TrimSpace(cli(0, "memory", "create", store, "/notes/todo.md", "milk\nbread\n", "-q"))
	cli(0, "memory", "update", store, mem, "--content", "milk\neggs\n")
	cli(0, "memory", "update", store, mem, "--path", "/notes/done.md")

	if got := cli(0, "memory", "get", store, "--path", "/notes/done.md"); got != "milk\neggs\n" {
		t.Errorf("memory get --path printed %q", got)
	}
	var whole api.Memory
	decodeOut(t, cli(0, "memory", "get", store, "--path", "/notes/done.md", "--json"), &whole)
	if whole.ID != mem {
		t.Errorf("memory get --path --json: id %s, want %s", whole.ID, mem)
	}

	var history []api.MemoryVersion
	decodeOut(t, cli(0, "memory", "versions", store, "--path", "/notes/todo.md"), &history)
	if len(history) != 3 || history[2].Operation != api.OperationCreated || history[0].MemoryID != mem {
		t.Fatalf("memory versions --path of the old path: %+v", history)
	}
	created, changed := history[2].ID, history[1].ID
	if got := cli(0, "memory", "version", "get", store, created); got != "milk\nbread\n" {
		t.Errorf("memory version get printed %q", got)
	}

	diff := cli(0, "memory", "diff", store, created, changed)
	for _, want := range []string{"--- /notes/todo.md " + created, "+++ /notes/todo.md " + changed, "-bread\n", "+eggs\n", " milk\n"} {
		if !strings.Contains(diff, want) {
			t.Errorf("memory diff lacks %q:\n%s", want, diff)
		}
	}
	if one := cli(0, "memory", "diff", store, changed); one != diff {
		t.Errorf("memory diff of one version is not the diff from the one before:\n%s", one)
	}
	if first := cli(0, "memory", "diff", store, created); !strings.Contains(first, "--- /dev/null") || !strings.Contains(first, "+bread\n") {
		t.Errorf("memory diff of the first version:\n%s", first)
	}
}

// Refusals name what was wrong; exit 2 for a wrong call (with the usage),
// 1 for what the server refused; nothing changes.
func TestCLIMemoryHistoryRefusals(t *testing.T) {
	rs, _ := cliServer(t)
	conn := []string{"--base-url", rs.baseURL, "--api-key", rs.adminKey}
	store := strings.TrimSpace(memstoreCLI(t, 0, append([]string{"store", "create", "notes", "-q"}, conn...)...))
	mem := strings.TrimSpace(memstoreCLI(t, 0, append([]string{"memory", "create", store, "/a.md", "a", "-q"}, conn...)...))
	before := memstoreCLI(t, 0, append([]string{"memory", "versions", store}, conn...)...)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"both an id and a path", []string{"memory", "get", store, mem, "--path", "/a.md"}, 2, "give the memory's id or --path, one of the two"},
		{"neither an id nor a path", []string{"memory", "get", store}, 2, "one of the two"},
		{"no memory at the path", []string{"memory", "get", store, "--path", "/b.md"}, 1, "no memory at /b.md in " + store},
		{"memory and path", []string{"memory", "versions", store, "--memory", mem, "--path", "/a.md"}, 2, "--memory and --path"},
		{"unknown version", []string{"memory", "diff", store, "memver_nope", "memver_nope2"}, 1, "memver_nope"},
		{"diff without a version", []string{"memory", "diff", store}, 2, "wrong number of arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), append(tc.args, conn...), testStreams(&stdout, &stderr)); code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
				t.Errorf("stdout %q; stderr lacks %q:\n%s", stdout.String(), tc.want, stderr.String())
			}
		})
	}
	if after := memstoreCLI(t, 0, append([]string{"memory", "versions", store}, conn...)...); after != before {
		t.Errorf("the versions changed:\n%s\nwas\n%s", after, before)
	}
}
