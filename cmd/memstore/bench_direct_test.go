package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/directseed"
	"github.com/memstore/memstore/internal/loadgen"
	"github.com/memstore/memstore/internal/testenv"
)

// A direct seed must be the data set an API seed of the same shape makes:
// the same stores, memories, versions and change feed, as a server reads
// them back, and found by search.
func TestBenchDirectSeedIsWhatTheAPISeedMakes(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testDirectSeed(t, "") })
	t.Run("postgres", func(t *testing.T) {
		testenv.Long(t) // a fresh schema and its migrations: seconds
		testDirectSeed(t, testenv.PostgresSchema(t))
	})
}

func testDirectSeed(t *testing.T, database string) {
	data := t.TempDir()
	target := []string{"--data", data}
	if database != "" {
		target = []string{"--database", database}
	}
	out := memstoreCLI(t, 0, append([]string{"bench", "--seed", "2x3x4", "--direct", "--content-size", "120", "--output", "json"}, target...)...)
	var direct struct {
		Database string        `json:"database"`
		Seed     loadgen.Shape `json:"seed"`
		directseed.Result
	}
	decodeOut(t, out, &direct)
	if len(direct.StoreIDs) != 2 || direct.Writes != 2*3*4 || !strings.HasPrefix(direct.Name, loadgen.SeedPrefix) {
		t.Fatalf("direct seed report: %s", out)
	}

	rs := testServe(t, serveOptions{dataDir: data, database: database})
	out = memstoreCLI(t, 0, "bench", "--base-url", rs.baseURL, "--api-key", rs.adminKey, "--seed", "2x3x4", "--content-size", "120",
		"--duration", "1s", "--requests", "1", "--followers", "0", "--mix", "memory.get=1", "--output", "json")
	var viaAPI loadgen.Report
	decodeOut(t, out, &viaAPI)
	c, err := client.New(rs.baseURL, client.WithAPIKey(rs.adminKey))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := seedShape(t, ctx, c, viaAPI.StoreIDs)
	if got := seedShape(t, ctx, c, direct.StoreIDs); !slices.Equal(got, want) {
		t.Errorf("the direct seed reads back as\n%s\nthe API seed as\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Search finds a directly seeded memory by a word only its head holds.
	st := direct.StoreIDs[1]
	page, err := c.ListMemories(ctx, st, client.ListMemoriesParams{})
	if err != nil || len(page.Data) != 3 {
		t.Fatalf("list: %v %+v", err, page)
	}
	m, err := c.GetMemory(ctx, st, page.Data[1].Memory.ID, client.GetMemoryParams{View: api.ViewFull})
	if err != nil {
		t.Fatal(err)
	}
	word := strings.Fields(*m.Content)[3] // "# PATH v4 RANDOM"
	hits, err := c.SearchMemories(ctx, st, word, client.SearchParams{})
	if err != nil || len(hits.Data) != 1 || hits.Data[0].Memory.ID != m.ID {
		t.Errorf("search for %q in store %s: %v %+v, want memory %s", word, st, err, hits, m.ID)
	}
}

// seedShape is what the API shows of seeded stores, without ids, times and
// the random part of each content: per store, each memory's path and size,
// its versions' operations, sizes, authors' kind and the head's first line,
// then the change feed's sequences and operations.
func seedShape(t *testing.T, ctx context.Context, c *client.Client, stores []string) []string {
	t.Helper()
	var lines []string
	for _, st := range stores {
		s, err := c.GetMemoryStore(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("store %q", s.Description))
		for item, err := range c.ListAllMemories(ctx, st, client.ListMemoriesParams{}) {
			if err != nil {
				t.Fatal(err)
			}
			if item.Memory == nil {
				continue
			}
			m, err := c.GetMemory(ctx, st, item.Memory.ID, client.GetMemoryParams{View: api.ViewFull})
			if err != nil {
				t.Fatal(err)
			}
			head := strings.Fields(*m.Content)
			var versions []string
			for v, err := range c.ListAllMemoryVersions(ctx, st, client.ListMemoryVersionsParams{MemoryID: m.ID}) {
				if err != nil {
					t.Fatal(err)
				}
				versions = append(versions, fmt.Sprintf("%s/%d/%s", v.Operation, *v.ContentSizeBytes, v.CreatedBy.Type))
			}
			lines = append(lines, fmt.Sprintf("  %s %d bytes, head %s %s, versions %v", m.Path, m.ContentSizeBytes, head[1], head[2], versions))
		}
		feed, err := c.ListChanges(ctx, st, client.ListChangesParams{})
		if err != nil {
			t.Fatal(err)
		}
		// The API seed's writers interleave memories: the feed's order is
		// compared per memory, its sequences as a whole.
		byPath := map[string][]string{}
		var seqs []int64
		for _, ch := range feed.Data {
			byPath[*ch.Path] = append(byPath[*ch.Path], ch.Operation)
			seqs = append(seqs, ch.Sequence)
		}
		lines = append(lines, fmt.Sprintf("  feed latest %d, sequences %v", feed.LatestSequence, seqs))
		for _, p := range slices.Sorted(maps.Keys(byPath)) {
			lines = append(lines, fmt.Sprintf("  feed %s: %v", p, byPath[p]))
		}
	}
	return lines
}

func TestBenchDirectRefusesWithoutASeedOrAServerDatabaseWithoutDirect(t *testing.T) {
	data := filepath.Join(t.TempDir(), "d")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--direct", "--data", data}, "--direct: give --seed STORESxMEMORIESxVERSIONS"},
		{[]string{"bench", "--seed", "1x1x1", "--database", "postgres://memstore@localhost/none", "--data", data}, "--database: only --direct writes into a database"},
	} {
		var outb, errb strings.Builder
		if code := run(context.Background(), c.args, streams{strings.NewReader(""), &outb, &errb}); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("memstore %s: exit %d, stderr %q; want 2 and %q", strings.Join(c.args, " "), code, errb.String(), c.want)
		}
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("a refused bench made %s: %v", data, err)
	}
}
