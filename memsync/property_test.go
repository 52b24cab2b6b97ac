package memsync

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/memstore/memstore/internal/testdigest"
)

// Paths the generators draw from: some differ only in case, one folder
// shares a spelling-insensitive name with another, one is invalid, one is the
// marker.
var genPaths = []string{"/a", "/b", "/A", "/d/x", "/D/y", "/d/z", "/bad/../p", "/" + MarkerName}

var genSHAs = []string{"s1", "s2", "s3"}

// genInput draws an arbitrary Reconcile input, biased towards the
// interesting overlaps (same sha on several sides, recent and old clocks).
func genInput(t *rapid.T) input {
	now := t0
	times := []time.Time{{}, now, now.Add(-10 * time.Second), now.Add(-40 * time.Second), now.Add(time.Minute)}
	maybe := func(label string, xs []string) string {
		return rapid.SampledFrom(append([]string{""}, xs...)).Draw(t, label)
	}
	in := input{state: State{}, local: Local{Files: map[string]LocalFile{}, Obscured: map[string]error{}}, remote: Remote{}}
	for _, p := range genPaths {
		ps := PathState{
			Base:         maybe("base "+p, genSHAs),
			MissingSince: rapid.SampledFrom(times).Draw(t, "missing "+p),
			Held:         maybe("held "+p, genSHAs),
			Sent:         maybe("sent "+p, genSHAs),
			DeleteSent:   rapid.Bool().Draw(t, "delete sent "+p),
		}
		if !ps.isZero() && rapid.Bool().Draw(t, "in state "+p) {
			in.state[p] = ps
		}
		if s := maybe("local "+p, genSHAs); s != "" {
			in.local.Files[p] = LocalFile{SHA256: s, Unsyncable: rapid.SampledFrom([]Unsyncable{Syncable, Syncable, Syncable, NotUTF8, TooLarge}).Draw(t, "unsyncable "+p)}
		}
		if s := maybe("remote "+p, genSHAs); s != "" {
			in.remote[p] = RemoteMemory{ID: id(p), SHA256: s}
		}
	}
	if rapid.IntRange(0, 5).Draw(t, "obscure") == 0 {
		in.local.Obscured[rapid.SampledFrom([]string{"/a", "/d", "/b"}).Draw(t, "obscured")] = errors.New("symlink")
	}
	in.local.Marker = rapid.SampledFrom([]MarkerState{MarkerTrusted, MarkerTrusted, MarkerTrusted, MarkerMissing, MarkerMismatch}).Draw(t, "marker")
	in.opts = Options{
		ReadOnly:        rapid.Bool().Draw(t, "read-only"),
		Deletions:       rapid.SampledFrom([]DeletionMode{DeletionsEnabled, DeletionsLogOnly, DeletionsDisabled}).Draw(t, "deletions"),
		Now:             now,
		Final:           rapid.Bool().Draw(t, "final"),
		CaseInsensitive: rapid.Bool().Draw(t, "case-insensitive"),
	}
	return in
}

// TestPropReconcileInvariants holds Reconcile to checkPlan's promises over
// random states, scans and listings, and checks that it is pure: same input,
// same plan, input untouched.
func TestPropReconcileInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t)
		before := in.state.Clone()
		plan := Reconcile(in.state, in.local, in.remote, in.opts)
		if !reflect.DeepEqual(in.state, before) {
			t.Fatalf("Reconcile modified its input state")
		}
		if err := checkPlan(in, plan); err != nil {
			t.Fatalf("%v\nactions: %s", err, fmtActions(plan.Actions))
		}
		if again := Reconcile(in.state, in.local, in.remote, in.opts); !reflect.DeepEqual(plan, again) {
			t.Fatalf("Reconcile is not deterministic")
		}
	})
}

// sim is an in-memory model of both sides and of apply: a folder (path →
// content), a server (path → memory), the sync state, and a clock. Its apply
// follows the contract documented on each Kind, including the server's
// preconditions, so a plan is run the way the real worker will run it.
type sim struct {
	t      *rapid.T
	folder map[string]string
	server map[string]simMemory
	state  State
	now    time.Time
	opts   Options
	nextID int
	// lose, when set, decides whether an upload or delete response is lost
	// after the server applied it.
	lose func() bool
}

type simMemory struct{ id, content string }

// simPaths have no prefix relations, as the server guarantees.
var simPaths = []string{"/a", "/b", "/c/d", "/c/e", "/f"}
var simContents = []string{"", "x", "y", "zz"}

func newSim(t *rapid.T, opts Options) *sim {
	s := &sim{t: t, folder: map[string]string{}, server: map[string]simMemory{}, state: State{}, now: t0, opts: opts}
	// Mount: the folder starts as a copy of the server.
	for _, p := range simPaths {
		if rapid.Bool().Draw(t, "initial "+p) {
			c := rapid.SampledFrom(simContents).Draw(t, "initial content "+p)
			s.remoteWrite(p, c)
			s.folder[p] = c
			s.state.MarkSynced(p, testdigest.SHA256(c))
		}
	}
	return s
}

func (s *sim) remoteWrite(p, c string) {
	m, ok := s.server[p]
	if !ok {
		s.nextID++
		m.id = fmt.Sprintf("mem_%d", s.nextID)
	}
	m.content = c
	s.server[p] = m
}

func (s *sim) byID(memID string) (string, simMemory, bool) {
	for p, m := range s.server {
		if m.id == memID {
			return p, m, true
		}
	}
	return "", simMemory{}, false
}

func (s *sim) sync(final bool) Plan {
	local := Local{Marker: MarkerTrusted, Files: map[string]LocalFile{}}
	for p, c := range s.folder {
		local.Files[p] = LocalFile{SHA256: testdigest.SHA256(c)}
	}
	remote := Remote{}
	for p, m := range s.server {
		remote[p] = RemoteMemory{ID: m.id, SHA256: testdigest.SHA256(m.content)}
	}
	opts := s.opts
	opts.Now, opts.Final = s.now, final
	in := input{state: s.state.Clone(), local: local, remote: remote, opts: opts}
	plan := Reconcile(in.state, in.local, in.remote, in.opts)
	if err := checkPlan(in, plan); err != nil {
		s.t.Fatalf("%v\nactions: %s", err, fmtActions(plan.Actions))
	}
	next := plan.Next
	for _, a := range plan.Actions {
		s.apply(a, next)
	}
	s.state = next
	return plan
}

func (s *sim) lost() bool { return s.lose != nil && s.lose() }

// localMatches is the re-check apply does just before touching the file.
func (s *sim) localMatches(a Action) bool {
	c, ok := s.folder[a.Path]
	if a.Local.Absent {
		return !ok
	}
	return ok && testdigest.SHA256(c) == a.Local.SHA256
}

func (s *sim) apply(a Action, next State) {
	switch a.Kind {
	case Download:
		_, m, ok := s.byID(a.MemoryID)
		if !ok || !s.localMatches(a) {
			return
		}
		s.folder[a.Path] = m.content
		next.MarkSynced(a.Path, testdigest.SHA256(m.content))
	case Create, Update:
		if !s.localMatches(a) {
			return
		}
		c := s.folder[a.Path]
		next.MarkSent(a.Path, testdigest.SHA256(c))
		if a.Kind == Update {
			p, m, ok := s.byID(a.MemoryID)
			switch {
			case !ok: // 404: deleted meanwhile, create instead
			case testdigest.SHA256(m.content) == testdigest.SHA256(c): // already there: 200, no new version
				if !s.lost() {
					next.MarkSynced(a.Path, testdigest.SHA256(c))
				}
				return
			case testdigest.SHA256(m.content) != a.RemoteSHA: // 409: the server won
				return
			default:
				m.content = c
				s.server[p] = m
				if !s.lost() {
					next.MarkSynced(a.Path, testdigest.SHA256(c))
				}
				return
			}
		}
		if _, taken := s.server[a.Path]; taken { // 409 path conflict
			return
		}
		s.remoteWrite(a.Path, c)
		if !s.lost() {
			next.MarkSynced(a.Path, testdigest.SHA256(c))
		}
	case DeleteRemote:
		if !s.localMatches(a) {
			return
		}
		next.MarkDeleteSent(a.Path)
		p, m, ok := s.byID(a.MemoryID)
		switch {
		case !ok:
			next.MarkGone(a.Path)
		case testdigest.SHA256(m.content) != a.RemoteSHA: // 409: the server changed, it wins
		default:
			delete(s.server, p)
			if !s.lost() {
				next.MarkGone(a.Path)
			}
		}
	case RemoveLocal:
		if s.localMatches(a) {
			delete(s.folder, a.Path)
			next.MarkGone(a.Path)
		}
	}
}

func (s *sim) serverContents() map[string]string {
	out := map[string]string{}
	for p, m := range s.server {
		out[p] = m.content
	}
	return out
}

// quiesce syncs, with the clock moving past the corroboration window, until
// a sync has nothing left to do.
func (s *sim) quiesce() {
	for range 10 {
		s.now = s.now.Add(DefaultCorroborationWindow + time.Second)
		plan := s.sync(false)
		busy := false
		for _, a := range plan.Actions {
			busy = busy || a.Kind.IO() || a.Kind == WaitCorroboration
		}
		if !busy {
			return
		}
	}
	s.t.Fatalf("the sync did not converge within 10 rounds")
}

// step runs one random event: an agent edit, a server edit by another
// writer (unless remoteWriters is false), a sync, or time passing.
func (s *sim) step(remoteWriters bool) {
	p := rapid.SampledFrom(simPaths).Draw(s.t, "path")
	ops := []string{"local write", "local delete", "sync", "sync", "tick"}
	if remoteWriters {
		ops = append(ops, "remote write", "remote delete")
	}
	switch rapid.SampledFrom(ops).Draw(s.t, "op") {
	case "local write":
		s.folder[p] = rapid.SampledFrom(simContents).Draw(s.t, "content")
	case "local delete":
		delete(s.folder, p)
	case "remote write":
		s.remoteWrite(p, rapid.SampledFrom(simContents).Draw(s.t, "content"))
	case "remote delete":
		delete(s.server, p)
	case "sync":
		s.sync(false)
	case "tick":
		s.now = s.now.Add(time.Duration(rapid.IntRange(0, 40).Draw(s.t, "seconds")) * time.Second)
	}
}

// TestPropConvergence: whatever the agent and other writers did, and with
// upload and delete responses lost at random, once the writing stops the
// syncs make the folder and the server equal.
func TestPropConvergence(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := newSim(t, Options{})
		s.lose = func() bool { return rapid.IntRange(0, 3).Draw(t, "lose response") == 0 }
		for range rapid.IntRange(0, 40).Draw(t, "steps") {
			s.step(true)
		}
		s.lose = nil
		s.quiesce()
		if got, want := s.folder, s.serverContents(); !maps.Equal(got, want) {
			t.Fatalf("folder %v != server %v", got, want)
		}
	})
}

// TestPropNoFalseConflict: with the worker as the server's only writer,
// lost responses never lead to a conflict, a duplicate create, a restored
// deletion or an overwritten edit; and every edit the agent made reaches the
// server.
func TestPropNoFalseConflict(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := newSim(t, Options{})
		s.lose = func() bool { return rapid.Bool().Draw(t, "lose response") }
		check := func(plan Plan) {
			for _, a := range plan.Actions {
				if a.Kind == Download && !plan.Rebuild {
					t.Fatalf("with no other writer the sync downloaded %s: %s", a.Path, fmtActions(plan.Actions))
				}
				if a.Kind == RemoveLocal {
					t.Fatalf("with no other writer the sync removed %s", a.Path)
				}
			}
			for _, n := range plan.Notes {
				if strings.Contains(n.Msg, "server version wins") || strings.Contains(n.Msg, "restoring") {
					t.Fatalf("false conflict: %s %s", n.Path, n.Msg)
				}
			}
		}
		for range rapid.IntRange(0, 40).Draw(t, "steps") {
			if rapid.IntRange(0, 2).Draw(t, "sync now") == 0 {
				check(s.sync(false))
			} else {
				s.step(false)
			}
		}
		agent := maps.Clone(s.folder)
		s.lose = nil
		s.now = s.now.Add(time.Second)
		final := s.sync(true) // the final sync waives the window
		check(final)
		s.quiesce()
		if final.Rebuild {
			// The agent emptied the folder at once: it is rebuilt, not
			// propagated, so the server keeps what it had.
			agent = s.serverContents()
		}
		if got := s.serverContents(); !maps.Equal(got, agent) || !maps.Equal(s.folder, agent) {
			t.Fatalf("server %v, folder %v, the agent's folder %v", got, s.folder, agent)
		}
	})
}

// TestPropReadOnlyNeverPushes: a read-only store's server is only ever
// changed by the other writers, whatever the agent does to the folder.
func TestPropReadOnlyNeverPushes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := newSim(t, Options{ReadOnly: true, Deletions: DeletionsEnabled})
		for range rapid.IntRange(0, 40).Draw(t, "steps") {
			before := s.serverContents()
			if rapid.Bool().Draw(t, "sync now") {
				s.now = s.now.Add(time.Minute)
				s.sync(rapid.Bool().Draw(t, "final"))
				if after := s.serverContents(); !maps.Equal(before, after) {
					t.Fatalf("a read-only sync changed the server: %v -> %v", before, after)
				}
			} else {
				s.step(true)
			}
		}
	})
}

// TestPropLocalEditNeverDiscardedWithoutCopy: whatever the state, scan and
// listing, an action that overwrites or removes a file holding content the
// server did not have at the last sync (a local edit) keeps a copy of it
// first. Overwriting or removing the synced content itself loses nothing:
// the server's versions hold it.
func TestPropLocalEditNeverDiscardedWithoutCopy(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t)
		plan := Reconcile(in.state, in.local, in.remote, in.opts)
		for _, a := range plan.Actions {
			lf, present := in.local.Files[a.Path]
			overwrites := present && (a.Kind == Download && !a.Local.Absent || a.Kind == RemoveLocal)
			if !overwrites {
				continue
			}
			ps := in.state[a.Path]
			synced := ps.Base
			if rm, ok := in.remote[a.Path]; ok && ps.Sent != "" && rm.SHA256 == ps.Sent {
				synced = ps.Sent // an upload whose answer was lost landed
			}
			if lf.SHA256 != synced && !a.Keep {
				t.Fatalf("%v over %s, which holds a local edit (%s, last synced %q), keeps no copy\nactions: %s",
					a.Kind, a.Path, lf.SHA256, synced, fmtActions(plan.Actions))
			}
		}
	})
}
