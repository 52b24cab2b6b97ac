package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
)

// `memstore memory search` finds a memory by a word only it holds, keeps
// to --prefix, and refuses an empty query with the server's message.
func TestCLIMemorySearch(t *testing.T) {
	rs, data := cliServer(t)
	t.Setenv("MEMSTORE_BASE_URL", rs.baseURL)
	t.Setenv("MEMSTORE_DATA", data)
	store := strings.TrimSpace(memstoreCLI(t, 0, "store", "create", "Team Notes", "-q"))
	memstoreCLI(t, 0, "memory", "create", store, "/runbooks/deploy.md", "--", "Drain the axolotl queue first.")
	memstoreCLI(t, 0, "memory", "create", store, "/notes/pets.md", "--", "An axolotl named Bob.")
	memstoreCLI(t, 0, "memory", "create", store, "/notes/other.md", "--", "Nothing to see.")

	var hits []api.SearchHit
	decodeOut(t, memstoreCLI(t, 0, "memory", "search", store, "axolotl", "queue"), &hits)
	if len(hits) != 1 || hits[0].Memory.Path != "/runbooks/deploy.md" || !strings.Contains(hits[0].Snippet, "**axolotl**") {
		t.Fatalf("search axolotl queue printed %+v", hits)
	}
	decodeOut(t, memstoreCLI(t, 0, "memory", "search", store, "axolotl", "--prefix", "/notes/"), &hits)
	if len(hits) != 1 || hits[0].Memory.Path != "/notes/pets.md" {
		t.Fatalf("search under /notes/ printed %+v", hits)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"memory", "search", store, "?!"}, testStreams(&out, &errb)); code != 1 || !strings.Contains(errb.String(), "no word to search for") {
		t.Fatalf("an empty query: exit %d, stderr %q", code, errb.String())
	}
}
