package memsync_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/memstore/memstore/internal/testenv"
	"github.com/memstore/memstore/memsync"
)

// A worker killed at any moment of a busy session loses nothing: the
// session below — the agent writing, editing, creating and removing files,
// emptying the folder, another writer changing and deleting memories,
// syncs and the end — is
// run once to list every fault point it reaches, then once per point with
// the worker killed there (with MEMSTORE_LONG_TESTS; otherwise at the
// first, the middle and the last time it reaches each): the disk as the kill leaves it is what a new
// worker adopts (killedAt), and the dead worker's requests stop reaching
// the server. The new worker runs the agent's steps from the one the kill
// interrupted (a tool call whose result was not posted runs again) and
// ends the session. Every edit of the agent and of the other writer must
// be on the server, and nothing else.
func TestAKillAtAnyFaultPointLosesNothing(t *testing.T) {
	type step struct {
		name string
		do   func(e *env, m *mount)
	}
	write := func(rel, content string) step {
		return step{"write " + rel, func(e *env, m *mount) { writeFile(t, m.dir, rel, content) }}
	}
	remove := func(rel string) step {
		return step{"remove " + rel, func(e *env, m *mount) {
			if err := os.Remove(filepath.Join(m.dir, rel)); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
		}}
	}
	syncAll := step{"sync", func(e *env, m *mount) { m.Sync(e.ctx) }}
	// A tool that empties the folder: the next sync rebuilds it from the
	// server, deleting nothing there.
	wipe := step{"wipe", func(e *env, m *mount) {
		entries, err := os.ReadDir(m.dir)
		must(t, err)
		for _, de := range entries {
			if de.Name() != memsync.MarkerName {
				must(t, os.RemoveAll(filepath.Join(m.dir, de.Name())))
			}
		}
	}}
	steps := []step{
		write("a.md", "a1"), write("b.md", "b1"), write("c.md", "c1"),
		syncAll,
		write("a.md", "a2"), write("b.md", "b2"), write("d/x.md", "d1"), write("c.md", "c2"),
		syncAll, wipe, syncAll,
		write("e.md", "e1"), remove("seed-3.md"),
	}
	want := map[string]string{
		"/a.md": "a2", "/b.md": "b2", "/c.md": "c2", "/d/x.md": "d1", "/e.md": "e1",
		"/seed-1.md": "changed by another writer", "/seed-4.md": "created by another writer",
	}
	// The other writer acts while the agent works: once the session has
	// synced once, whether or not the worker died since.
	other := func(e *env) {
		e.put("/seed-1.md", "changed by another writer")
		e.remove("/seed-2.md")
		e.put("/seed-4.md", "created by another writer")
	}

	// run plays the session, killing the worker at the n-th time it
	// reaches point (never, with point ""), and returns the points reached.
	run := func(t *testing.T, point string, n int) []string {
		e := newFeedEnv(t)
		for _, p := range []string{"/seed-1.md", "/seed-2.md", "/seed-3.md"} {
			e.put(p, "seed")
		}
		root := t.TempDir()
		var (
			mu      sync.Mutex
			reached []string
			hits    int
			crashed string
		)
		dead := func() bool { mu.Lock(); defer mu.Unlock(); return crashed != "" }
		m := e.session(root, sessionID("sesn_1"), func(c *memsync.SessionConfig, _ *memsync.StoreMount) {
			c.FaultPoint = func(p string) {
				mu.Lock()
				defer mu.Unlock()
				if crashed != "" {
					return
				}
				reached = append(reached, p)
				if p == point {
					if hits++; hits == n {
						crashed = killedAt(t, root)
					}
				}
			}
		})
		m.rec.before = func(*http.Request) error {
			if dead() {
				return errors.New("the worker is dead")
			}
			return nil
		}
		mustMount := func(m *mount) {
			if err := m.Mount(e.ctx); err != nil && !dead() {
				t.Fatal(err)
			}
		}
		mustMount(m)
		synced := false
		next := 0
		for ; next < len(steps) && !dead(); next++ {
			steps[next].do(e, m)
			if steps[next].name == "sync" && !synced {
				synced = true
				other(e)
			}
		}
		if !dead() {
			m.End(e.ctx, true)
		}
		if !dead() {
			if point != "" {
				t.Fatalf("the session never reached %s#%d", point, n)
			}
			equal(t, "server", e.server(), want)
			return reached
		}
		// The kill: the step that was running is run again by the next
		// worker, which adopts what the dead one left.
		m.Crash()
		if point == "end.disposing" {
			// Killed while the folder's files were being removed: some
			// are gone already. b.md alone was gone in the one loss the
			// fault suite saw before this removal was journaled (see
			// docs/worker.md, "The fault suite").
			for _, rel := range []string{"b.md", "a.md", "d/x.md", "seed-1.md"} {
				must(t, os.Remove(filepath.Join(crashed, "notes", rel)))
			}
		}
		if point == "mount.downloaded" {
			// The mount writes its downloads straight to their names, many
			// at once: the ones in flight at the kill are cut short there.
			have := folder(t, filepath.Join(crashed, "notes"))
			for _, p := range []string{"/seed-1.md", "/seed-2.md", "/seed-3.md"} {
				if have[p] != "seed" {
					writeFile(t, filepath.Join(crashed, "notes"), p[1:], "se")
				}
			}
		}
		if !synced {
			other(e)
		}
		again := e.session(crashed, sessionID("sesn_1"))
		if err := again.Mount(e.ctx); err != nil {
			t.Fatalf("the next worker cannot adopt the folder: %v\n%s", err, e.logs)
		}
		for i := max(next-1, 0); i < len(steps); i++ {
			steps[i].do(e, again)
		}
		again.End(e.ctx, true)
		equal(t, fmt.Sprintf("server after a kill at %s#%d", point, n), e.server(), want)
		assertNothingLeft(t, crashed)
		return reached
	}

	points := run(t, "", 0)
	total := map[string]int{}
	for _, p := range points {
		total[p]++
	}
	seen := map[string]int{}
	for _, p := range points {
		seen[p]++
		n := seen[p]
		// The test command kills at the first, the middle and the last
		// time each point is reached (the middle download is the
		// rebuild's); the long run at every one.
		if !testenv.IsLong() && n != 1 && n != (total[p]+1)/2 && n != total[p] {
			continue
		}
		t.Run(fmt.Sprintf("%s#%d", p, n), func(t *testing.T) { run(t, p, n) })
	}
	if len(points) < 10 {
		t.Fatalf("the session reached only %v", points)
	}
}
