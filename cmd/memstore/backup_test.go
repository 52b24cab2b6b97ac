package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

// ackedWrite is one write the server acknowledged: the content the memory
// held once it returned, and when it returned.
type ackedWrite struct {
	content string
	at      time.Time
}

// The restore drill of issue 24: 8 writers write while the backup runs;
// the restored server holds every write acknowledged before the backup
// began, and a truncated backup is refused.
func TestBackupUnderLoadRestoresEveryAcknowledgedWrite(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	rs := testServe(t, serveOptions{dataDir: data})
	ctx := context.Background()
	c, err := client.New(rs.baseURL, client.WithAPIKey(rs.adminKey))
	if err != nil {
		t.Fatal(err)
	}
	store, err := c.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "drill"})
	if err != nil {
		t.Fatal(err)
	}

	// Each writer creates its memories and rewrites them in turn; it alone
	// writes them, so their acknowledged contents are in order.
	var mu sync.Mutex
	acked := map[string][]ackedWrite{} // memory id → its acknowledged writes
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []string
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				text := fmt.Sprintf("writer %d write %d", w, n)
				var id string
				if n%3 == 0 || len(mine) == 0 {
					m, err := c.CreateMemory(ctx, store.ID, api.CreateMemoryRequest{Path: fmt.Sprintf("/w%d/%d.md", w, n), Content: text})
					if err != nil {
						t.Errorf("writer %d: %v", w, err)
						return
					}
					id = m.ID
					mine = append(mine, id)
				} else {
					id = mine[n%len(mine)]
					if _, err := c.UpdateMemory(ctx, store.ID, id, api.UpdateMemoryRequest{Content: &text}); err != nil {
						t.Errorf("writer %d: %v", w, err)
						return
					}
				}
				at := time.Now()
				mu.Lock()
				acked[id] = append(acked[id], ackedWrite{text, at})
				mu.Unlock()
			}
		}()
	}
	time.Sleep(time.Second)
	backupFile := filepath.Join(dir, "drill.backup")
	point := time.Now()
	memstoreCLI(t, 0, "backup", "--data", data, "--to", backupFile)
	time.Sleep(300 * time.Millisecond) // the writers carry on past the backup
	close(stop)
	wg.Wait()

	var before int
	for _, ws := range acked {
		for _, w := range ws {
			if w.at.Before(point) {
				before++
			}
		}
	}
	if before < 8 {
		t.Fatalf("only %d writes acknowledged before the backup: the drill proves nothing", before)
	}

	if out := memstoreCLI(t, 0, "backup", "--verify", backupFile); !strings.HasPrefix(out, "verified "+backupFile) || !strings.Contains(out, "memstore.db") || !strings.Contains(out, "admin.key") {
		t.Errorf("backup --verify printed %q", out)
	}

	restored := filepath.Join(dir, "restored")
	memstoreCLI(t, 0, "restore", "--from", backupFile, "--data", restored)
	rs2 := testServe(t, serveOptions{dataDir: restored})
	// The admin key came back with the data folder: the CLI finds it there.
	var mems []api.MemoryListItem
	decodeOut(t, memstoreCLI(t, 0, "memory", "list", store.ID, "--base-url", rs2.baseURL, "--data", restored, "--output", "json"), &mems)
	if len(mems) == 0 {
		t.Fatal("the restored store lists no memory")
	}
	c2, err := client.New(rs2.baseURL, client.WithAPIKey(strings.TrimSpace(readFile(t, filepath.Join(restored, "admin.key")))))
	if err != nil {
		t.Fatal(err)
	}
	var checked int
	for id, ws := range acked {
		last := -1 // the last write acknowledged before the backup began
		for i, w := range ws {
			if w.at.Before(point) {
				last = i
			}
		}
		if last < 0 {
			continue
		}
		m, err := c2.GetMemory(ctx, store.ID, id, client.GetMemoryParams{View: api.ViewFull})
		if err != nil {
			t.Errorf("memory %s, acknowledged %q before the backup: %v", id, ws[last].content, err)
			continue
		}
		held := -1
		for i, w := range ws {
			if m.Content != nil && *m.Content == w.content {
				held = i
			}
		}
		if held < last {
			t.Errorf("memory %s holds %q, older than %q acknowledged before the backup", id, *m.Content, ws[last].content)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no memory checked")
	}

	// A truncated backup fails --verify and restores nothing.
	whole, err := os.ReadFile(backupFile)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.backup")
	if err := os.WriteFile(cut, whole[:len(whole)*2/3], 0o600); err != nil {
		t.Fatal(err)
	}
	// So does one with a byte changed in the middle.
	flipped := filepath.Join(dir, "flipped.backup")
	damaged := bytes.Clone(whole)
	damaged[len(damaged)/2] ^= 0xff
	if err := os.WriteFile(flipped, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"backup", "--verify", cut}, {"restore", "--from", cut, "--data", filepath.Join(dir, "from-cut")}, {"backup", "--verify", flipped}} {
		var out, errb bytes.Buffer
		if code := run(ctx, args, testStreams(&out, &errb)); code != 1 || !strings.Contains(errb.String(), " is not a whole memstore backup") {
			t.Errorf("%v: exit %d, stderr %q; want 1 and the file called damaged", args, code, errb.String())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "from-cut")); !os.IsNotExist(err) {
		t.Errorf("a refused restore left %s behind (%v)", filepath.Join(dir, "from-cut"), err)
	}
}

func TestBackupAndRestoreRefusals(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	testServe(t, serveOptions{dataDir: data})
	backupFile := filepath.Join(dir, "one.backup")
	memstoreCLI(t, 0, "backup", "--data", data, "--to", backupFile)
	before := readFile(t, backupFile)

	busy := filepath.Join(dir, "busy")
	if err := os.MkdirAll(busy, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(busy, "notes.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"backup", "--data", data, "--to", backupFile}, 1, "already exists; give --to a new file name"},
		{[]string{"backup", "--data", filepath.Join(dir, "nothing"), "--to", filepath.Join(dir, "two.backup")}, 1, "has no memstore.db: point --data at the folder"},
		{[]string{"backup", "--data", data}, 2, "--to FILE is required"},
		{[]string{"backup", "--to", "x", "--verify", backupFile}, 2, "give one of them"},
		{[]string{"backup", "--verify", filepath.Join(dir, "missing.backup")}, 1, "no such file"},
		{[]string{"backup", "--database", "postgres://memstore:pw@db:5432/memstore"}, 1, "pg_dump --format=custom --file=memstore.dump 'postgres://memstore@db:5432/memstore'"},
		{[]string{"restore", "--from", backupFile, "--data", busy}, 1, busy + " is not empty; restore into a new folder"},
		{[]string{"restore", "--data", busy}, 2, "--from FILE is required"},
		{[]string{"restore", "--from", backupFile}, 2, "--data DIR is required"},
		{[]string{"restore", "--from", filepath.Join(busy, "notes.txt"), "--data", filepath.Join(dir, "new")}, 1, "is not a whole memstore backup"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), tc.args, testStreams(&out, &errb)); code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
		if strings.Contains(errb.String(), ":pw@") {
			t.Errorf("%v printed the password: %q", tc.args, errb.String())
		}
	}
	// Nothing changed: the backup, the busy folder, no half-made folder.
	if readFile(t, backupFile) != before {
		t.Error("a refused backup changed the existing file")
	}
	if entries, _ := os.ReadDir(busy); len(entries) != 1 || readFile(t, filepath.Join(busy, "notes.txt")) != "mine" {
		t.Errorf("a refused restore touched %s: %v", busy, entries)
	}
	for _, p := range []string{"two.backup", "new"} {
		if _, err := os.Stat(filepath.Join(dir, p)); !os.IsNotExist(err) {
			t.Errorf("a refusal left %s behind", p)
		}
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".memstore-*")); len(leftovers) > 0 {
		t.Errorf("work folders left behind: %v", leftovers)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
