package memsync

import (
	"reflect"
	"testing"
	"time"
)

// FuzzReconcile decodes arbitrary bytes into a Reconcile input over a small
// alphabet of paths and hashes (so overlaps are common) and checks that
// Reconcile never panics, never modifies its input, and keeps checkPlan's
// promises.
func FuzzReconcile(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0xff, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add([]byte("\x07\x01\x01\x01\x02\x02\x03\x00\x10\x20\x30\x40\x50\x60\x70\x80"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := decodeInput(data)
		before := in.state.Clone()
		plan := Reconcile(in.state, in.local, in.remote, in.opts)
		if !reflect.DeepEqual(in.state, before) {
			t.Fatal("Reconcile modified its input state")
		}
		if err := checkPlan(in, plan); err != nil {
			t.Fatalf("%v\nactions: %s", err, fmtActions(plan.Actions))
		}
	})
}

// decodeInput reads bytes as: an options byte, then per path a record of
// state, local and remote choices; missing bytes read as zero.
func decodeInput(data []byte) input {
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	shas := append([]string{""}, genSHAs...)
	pick := func() string { return shas[int(next())%len(shas)] }
	times := []time.Time{{}, t0, t0.Add(-10 * time.Second), t0.Add(-40 * time.Second), t0.Add(time.Hour)}

	o := next()
	in := input{
		state:  State{},
		local:  Local{Files: map[string]LocalFile{}, Obscured: map[string]error{}},
		remote: Remote{},
		opts: Options{
			ReadOnly:            o&1 != 0,
			Deletions:           DeletionMode(o >> 1 & 3 % 3),
			Final:               o&8 != 0,
			CaseInsensitive:     o&16 != 0,
			CorroborationWindow: time.Duration(o>>5) * 10 * time.Second,
			Now:                 t0,
		},
	}
	in.local.Marker = MarkerState(next() % 3)
	for _, p := range genPaths {
		ps := PathState{Base: pick(), MissingSince: times[int(next())%len(times)], Held: pick(), Sent: pick(), DeleteSent: next()%4 == 0}
		if !ps.isZero() {
			in.state[p] = ps
		}
		if s := pick(); s != "" {
			in.local.Files[p] = LocalFile{SHA256: s, Unsyncable: Unsyncable(next() % 3)}
		}
		if s := pick(); s != "" {
			in.remote[p] = RemoteMemory{ID: id(p), SHA256: s}
		}
		if next()%8 == 7 {
			in.local.Obscured[p] = errBadFuzzEntry
		}
	}
	return in
}

type fuzzError string

func (e fuzzError) Error() string { return string(e) }

const errBadFuzzEntry = fuzzError("unreadable")
