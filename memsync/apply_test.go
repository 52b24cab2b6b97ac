package memsync_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/memstore/memstore/internal/confined"
	"github.com/memstore/memstore/internal/testdigest"
	"github.com/memstore/memstore/memsync"
)

// These tests hand apply the action a sync would have planned, then change
// the world before it runs, as the agent or another writer might between a
// sync's scan and its actions.

func TestApplyDownloadLeavesAFileEditedSinceThePlan(t *testing.T) {
	e := newEnv(t)
	e.put("/a.md", "a")
	m := e.mount(t.TempDir())
	e.put("/a.md", "a from the server")
	writeFile(t, m.dir, "a.md", "the agent's newer edit")
	state := m.ApplyActions(e.ctx, []memsync.Action{{
		Kind: memsync.Download, Path: "/a.md", MemoryID: e.find("/a.md").ID, RemoteSHA: testdigest.SHA256("a from the server"),
		Local: confined.Precondition{SHA256: testdigest.SHA256("a")},
	}})
	equal(t, "folder", folder(t, m.dir), map[string]string{"/a.md": "the agent's newer edit"})
	if state["/a.md"].Base != testdigest.SHA256("a") {
		t.Fatalf("state %+v: a skipped download must not advance the base", state["/a.md"])
	}
}

func TestApplyDownloadMarksTheFetchedContent(t *testing.T) {
	// The listing said "v2", but by the time the content is fetched the
	// memory holds "v3": the file gets v3 and the base says v3.
	e := newEnv(t)
	e.put("/a.md", "v1")
	m := e.mount(t.TempDir())
	e.put("/a.md", "v3")
	state := m.ApplyActions(e.ctx, []memsync.Action{{
		Kind: memsync.Download, Path: "/a.md", MemoryID: e.find("/a.md").ID, RemoteSHA: testdigest.SHA256("v2"),
		Local: confined.Precondition{SHA256: testdigest.SHA256("v1")},
	}})
	equal(t, "folder", folder(t, m.dir), map[string]string{"/a.md": "v3"})
	if state["/a.md"].Base != testdigest.SHA256("v3") {
		t.Fatalf("base %q, want the fetched content's sha", state["/a.md"].Base)
	}
}

func TestApplyUploadSkipsAFileEditedSinceThePlan(t *testing.T) {
	e := newEnv(t)
	m := e.mount(t.TempDir())
	writeFile(t, m.dir, "n.md", "newer")
	state := m.ApplyActions(e.ctx, []memsync.Action{{Kind: memsync.Create, Path: "/n.md", Local: confined.Precondition{SHA256: testdigest.SHA256("older")}}})
	if w := writes(m.rec.take()); len(w) != 0 {
		t.Fatalf("sent %v for a file that changed since the plan", w)
	}
	if _, ok := state["/n.md"]; ok {
		t.Fatalf("state %+v", state)
	}
}

func TestApplyUpdateOfADeletedMemoryCreatesIt(t *testing.T) {
	e := newEnv(t)
	e.put("/a.md", "a")
	m := e.mount(t.TempDir())
	id := e.find("/a.md").ID
	e.remove("/a.md")
	writeFile(t, m.dir, "a.md", "edited")
	state := m.ApplyActions(e.ctx, []memsync.Action{{
		Kind: memsync.Update, Path: "/a.md", MemoryID: id, RemoteSHA: testdigest.SHA256("a"), Local: confined.Precondition{SHA256: testdigest.SHA256("edited")},
	}})
	equal(t, "server", e.server(), map[string]string{"/a.md": "edited"})
	if got := state["/a.md"]; got != (memsync.PathState{Base: testdigest.SHA256("edited")}) {
		t.Fatalf("state %+v", got)
	}
}

func TestApplyUpdateConflictLetsTheServerWin(t *testing.T) {
	e := newEnv(t)
	e.put("/a.md", "a")
	m := e.mount(t.TempDir())
	e.put("/a.md", "changed meanwhile")
	writeFile(t, m.dir, "a.md", "edited")
	state := m.ApplyActions(e.ctx, []memsync.Action{{
		Kind: memsync.Update, Path: "/a.md", MemoryID: e.find("/a.md").ID, RemoteSHA: testdigest.SHA256("a"), Local: confined.Precondition{SHA256: testdigest.SHA256("edited")},
	}})
	equal(t, "server", e.server(), map[string]string{"/a.md": "changed meanwhile"})
	// The base stays; the sent record lets the next listing tell "the
	// server holds what we sent" from "someone else won".
	if got := state["/a.md"]; got.Base != testdigest.SHA256("a") || got.Sent != testdigest.SHA256("edited") {
		t.Fatalf("state %+v", got)
	}
	m.Sync(e.ctx)
	equal(t, "folder after the next sync", folder(t, m.dir), map[string]string{"/a.md": "changed meanwhile"})
}

func TestApplyRefusalIsRememberedUntilTheFileChanges(t *testing.T) {
	e := newEnv(t)
	e.put("/a.md", "a")
	m := e.mount(t.TempDir())
	writeFile(t, m.dir, "a.md", "edited")
	// A precondition the server cannot parse is a 400, the stand-in here
	// for any content the server refuses.
	state := m.ApplyActions(e.ctx, []memsync.Action{{
		Kind: memsync.Update, Path: "/a.md", MemoryID: e.find("/a.md").ID, RemoteSHA: "not-a-sha", Local: confined.Precondition{SHA256: testdigest.SHA256("edited")},
	}})
	if got := state["/a.md"]; got.Held != testdigest.SHA256("edited") || got.Base != testdigest.SHA256("a") {
		t.Fatalf("state %+v, want the refused sha held", got)
	}
	if w := e.logs.Records(t, slog.LevelWarn, "the server refused this file's content"); len(w) != 1 || w[0]["path"] != "/a.md" {
		t.Fatalf("refusal warning: %v", w)
	}
	m.rec.take()
	m.Sync(e.ctx)
	if w := writes(m.rec.take()); len(w) != 0 {
		t.Fatalf("a refused content was sent again: %v", w)
	}
	writeFile(t, m.dir, "a.md", "edited again")
	m.Sync(e.ctx)
	equal(t, "server", e.server(), map[string]string{"/a.md": "edited again"})
}

func TestApplyDeleteRechecksTheFileAndTheMarker(t *testing.T) {
	e := newEnv(t)
	e.put("/a.md", "a")
	e.put("/b.md", "b")
	m := e.mount(t.TempDir())
	del := func(p, content string) memsync.Action {
		return memsync.Action{Kind: memsync.DeleteRemote, Path: p, MemoryID: e.find(p).ID, RemoteSHA: testdigest.SHA256(content), Local: confined.Precondition{Absent: true}}
	}
	// a.md is back (it never left); b.md is gone but replaced by a link.
	outside := t.TempDir()
	removeFile(t, m.dir, "b.md")
	must(t, os.Symlink(filepath.Join(outside, "x"), filepath.Join(m.dir, "b.md")))
	m.ApplyActions(e.ctx, []memsync.Action{del("/a.md", "a"), del("/b.md", "b")})
	if w := writes(m.rec.take()); len(w) != 0 {
		t.Fatalf("deletes sent although the paths are occupied: %v", w)
	}
	// Both gone for real, but the marker no longer names the store.
	removeFile(t, m.dir, "a.md")
	removeFile(t, m.dir, "b.md")
	writeFile(t, m.dir, memsync.MarkerName, "version 1\nmemstore_other")
	m.ApplyActions(e.ctx, []memsync.Action{del("/a.md", "a"), del("/b.md", "b")})
	if w := writes(m.rec.take()); len(w) != 0 {
		t.Fatalf("deletes sent from a folder whose marker changed: %v", w)
	}
	equal(t, "server", e.server(), map[string]string{"/a.md": "a", "/b.md": "b"})
	// With the marker back, the deletes go out, guarded: b changed on the
	// server meanwhile, so only a is deleted.
	writeFile(t, m.dir, memsync.MarkerName, "version 1\n"+e.storeID)
	e.put("/b.md", "b2")
	state := m.ApplyActions(e.ctx, []memsync.Action{del("/a.md", "a"), del("/b.md", "b")})
	equal(t, "server", e.server(), map[string]string{"/b.md": "b2"})
	if _, ok := state["/a.md"]; ok {
		t.Fatalf("a deleted memory is still in the state: %+v", state)
	}
	if !state["/b.md"].DeleteSent || state["/b.md"].Base != testdigest.SHA256("b") {
		t.Fatalf("state of the refused delete %+v", state["/b.md"])
	}
}

func TestApplyRemoveLocalKeepsAFreshEdit(t *testing.T) {
	e := newEnv(t)
	e.put("/d/a.md", "a")
	e.put("/d/b.md", "b")
	m := e.mount(t.TempDir())
	writeFile(t, m.dir, "d/b.md", "edited")
	state := m.ApplyActions(e.ctx, []memsync.Action{
		{Kind: memsync.RemoveLocal, Path: "/d/a.md", Local: confined.Precondition{SHA256: testdigest.SHA256("a")}},
		{Kind: memsync.RemoveLocal, Path: "/d/b.md", Local: confined.Precondition{SHA256: testdigest.SHA256("b")}},
	})
	equal(t, "folder", folder(t, m.dir), map[string]string{"/d/b.md": "edited"})
	if _, ok := state["/d/a.md"]; ok || state["/d/b.md"].Base != testdigest.SHA256("b") {
		t.Fatalf("state %+v", state)
	}
	// A removal that empties a folder prunes it.
	m.ApplyActions(e.ctx, []memsync.Action{{Kind: memsync.RemoveLocal, Path: "/d/b.md", Local: confined.Precondition{SHA256: testdigest.SHA256("edited")}}})
	if _, err := os.Lstat(filepath.Join(m.dir, "d")); !os.IsNotExist(err) {
		t.Fatalf("the emptied folder d is still there: %v", err)
	}
}
