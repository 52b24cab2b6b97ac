package memsync

import (
	"fmt"
	"maps"
	"slices"

	"github.com/memstore/memstore/internal/validate"
)

// input is one call of Reconcile.
type input struct {
	state  State
	local  Local
	remote Remote
	opts   Options
}

// checkPlan verifies the promises every plan keeps whatever its inputs —
// the properties the rapid and fuzz tests hold Reconcile to:
//
//   - no local edit is discarded unless the server changed too;
//   - nothing is deleted on the server without a corroborated local delete
//     (trusted folder, deletions enabled, not read-only, file gone past the
//     window or final sync, server unchanged, within the cap);
//   - a read-only store never pushes; an untrusted folder never pushes,
//     deletes or removes, and one holding anything gets no action at all;
//   - uploads never create a duplicate or overwrite a server change;
//   - no I/O for invalid, obscured or case-colliding paths;
//   - the next state's base only moves where both sides agree.
func checkPlan(in input, p Plan) error {
	window := DefaultCorroborationWindow
	if in.opts.CorroborationWindow > 0 {
		window = in.opts.CorroborationWindow
	}
	trusted := in.local.Marker == MarkerTrusted
	base := func(path string) string {
		ps := in.state[path]
		rm, inR := in.remote[path]
		switch {
		case inR && ps.Sent != "" && rm.SHA256 == ps.Sent:
			return ps.Sent
		case !inR && ps.DeleteSent:
			return ""
		}
		return ps.Base
	}
	// The paths that can collide: a rebuild starts from the listing alone.
	all := slices.Collect(maps.Keys(in.remote))
	if !p.Rebuild {
		all = slices.AppendSeq(all, maps.Keys(in.local.Files))
		all = slices.AppendSeq(all, maps.Keys(in.local.Obscured))
		for path := range in.state {
			if base(path) != "" {
				all = append(all, path)
			}
		}
	}
	collides := func(path string) bool {
		for _, q := range pathPrefixes(path) {
			for _, o := range all {
				for _, oq := range pathPrefixes(o) {
					if oq != q && foldCase(oq) == foldCase(q) {
						return true
					}
				}
			}
		}
		return false
	}
	obscured := func(path string) bool {
		for _, q := range pathPrefixes(path) {
			if _, ok := in.local.Obscured[q]; ok {
				return true
			}
		}
		return false
	}

	if !trusted && !in.local.empty() && len(p.Actions) > 0 {
		return fmt.Errorf("untrusted folder holding files got actions: %v", fmtActions(p.Actions))
	}
	seen := map[string]bool{}
	deletes := 0
	for _, a := range p.Actions {
		if seen[a.Path] {
			return fmt.Errorf("two actions for %s", a.Path)
		}
		seen[a.Path] = true
		lf, inL := in.local.Files[a.Path]
		rm, inR := in.remote[a.Path]
		b := base(a.Path)
		if a.Kind.IO() {
			switch {
			case validate.Path("path", a.Path) != nil || a.Path == "/"+MarkerName:
				return fmt.Errorf("%v on an invalid path %q", a.Kind, a.Path)
			case obscured(a.Path):
				return fmt.Errorf("%v on obscured path %s", a.Kind, a.Path)
			case in.opts.CaseInsensitive && collides(a.Path):
				return fmt.Errorf("%v on case-colliding path %s", a.Kind, a.Path)
			case p.Rebuild && a.Kind != Download:
				return fmt.Errorf("rebuild planned %v for %s", a.Kind, a.Path)
			}
		}
		pushes := a.Kind == Create || a.Kind == Update || a.Kind == DeleteRemote
		if pushes && in.opts.ReadOnly {
			return fmt.Errorf("read-only store planned %v for %s", a.Kind, a.Path)
		}
		if (pushes || a.Kind == RemoveLocal) && !trusted {
			return fmt.Errorf("untrusted folder planned %v for %s", a.Kind, a.Path)
		}
		switch a.Kind {
		case Download:
			if !inR || a.MemoryID != rm.ID || a.RemoteSHA != rm.SHA256 {
				return fmt.Errorf("download of %s does not match the listing", a.Path)
			}
			if a.Base != "" && (!p.Rebuild || a.Base != rm.SHA256 || a.Base != b) {
				return fmt.Errorf("download of %s keeps base %q, which is not what both sides last agreed on and the server still holds", a.Path, a.Base)
			}
			if a.Local.Absent == inL {
				return fmt.Errorf("download of %s expects absent=%v but the scan has present=%v", a.Path, a.Local.Absent, inL)
			}
			if inL {
				if a.Local.SHA256 != lf.SHA256 || lf.SHA256 == rm.SHA256 {
					return fmt.Errorf("download of %s expects %q over local %q (remote %q)", a.Path, a.Local.SHA256, lf.SHA256, rm.SHA256)
				}
				if b != "" && rm.SHA256 == b {
					return fmt.Errorf("download of %s overwrites a local edit though the server did not change", a.Path)
				}
			}
		case RemoveLocal:
			if inR || !inL || b == "" || lf.SHA256 != b || a.Local.SHA256 != b {
				return fmt.Errorf("remove of %s would discard a local edit or a live memory", a.Path)
			}
		case Create:
			if inR {
				return fmt.Errorf("create of %s, which the server already has", a.Path)
			}
			if !inL || lf.Unsyncable != Syncable || a.Local.SHA256 != lf.SHA256 || in.state[a.Path].Held == lf.SHA256 {
				return fmt.Errorf("create of %s does not send the scanned, sendable content", a.Path)
			}
		case Update:
			if !inR || a.MemoryID != rm.ID || a.RemoteSHA != rm.SHA256 {
				return fmt.Errorf("update of %s does not match the listing", a.Path)
			}
			if b != rm.SHA256 {
				return fmt.Errorf("update of %s pushes over a server change", a.Path)
			}
			if !inL || lf.Unsyncable != Syncable || a.Local.SHA256 != lf.SHA256 || in.state[a.Path].Held == lf.SHA256 {
				return fmt.Errorf("update of %s does not send the scanned, sendable content", a.Path)
			}
		case DeleteRemote:
			deletes++
			since := in.state[a.Path].MissingSince
			switch {
			case in.opts.Deletions != DeletionsEnabled:
				return fmt.Errorf("delete of %s in deletion mode %v", a.Path, in.opts.Deletions)
			case inL || obscured(a.Path) || !a.Local.Absent:
				return fmt.Errorf("delete of %s, which is still in the folder", a.Path)
			case !inR || b == "" || rm.SHA256 != b || a.RemoteSHA != b || a.MemoryID != rm.ID:
				return fmt.Errorf("delete of %s not guarded by the unchanged synced sha", a.Path)
			case !in.opts.Final && (since.IsZero() || in.opts.Now.Sub(since) < window):
				return fmt.Errorf("delete of %s not corroborated (missing since %v, now %v)", a.Path, since, in.opts.Now)
			}
		}
	}
	if deletes > DeleteCap(len(in.remote)) {
		return fmt.Errorf("%d deletes over the cap of %d", deletes, DeleteCap(len(in.remote)))
	}
	for path, n := range p.Next {
		lf, inL := in.local.Files[path]
		rm, inR := in.remote[path]
		b := base(path)
		if n.isZero() {
			return fmt.Errorf("next state stores an empty entry for %s", path)
		}
		if n.Base != "" && n.Base != b && n.Base != in.state[path].Base && !(inL && inR && lf.SHA256 == rm.SHA256 && n.Base == rm.SHA256) {
			return fmt.Errorf("next base of %s moved to %q though the sides do not agree on it", path, n.Base)
		}
		if n.Held != "" && trusted && (!inL || lf.SHA256 != n.Held) {
			return fmt.Errorf("next state holds back %q for %s, which is not the file's content", n.Held, path)
		}
		if !n.MissingSince.IsZero() && inL && trusted {
			return fmt.Errorf("%s is in the folder but its deletion clock runs", path)
		}
	}
	return nil
}
