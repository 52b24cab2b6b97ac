package memsync

import (
	"context"
	"time"

	"github.com/memstore/memstore/internal/confined"
)

// ApplyActions runs actions on the session's first store the way a sync
// runs a plan's, and returns the state it leaves. Tests use it to stage the
// races a real sync cannot time: a file edited, or a memory changed, between
// the plan and the action.
func (s *Session) ApplyActions(ctx context.Context, actions []Action) State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stores[0]
	a := st.newApplier(st.state.full())
	a.apply(ctx, actions)
	st.state = keepState(a.next)
	return a.next.Clone()
}

// SkipRacyWindow gives every store of the session a fresh hash cache whose
// clock is an hour ahead, so that files written moments ago count as past
// the racy window and are cached once hashed: the state a folder reaches
// two seconds after its last change, without waiting for it. Call it
// before the first sync.
func (s *Session) SkipRacyWindow() {
	s.mu.Lock()
	defer s.mu.Unlock()
	later := time.Now().Add(time.Hour)
	for _, st := range s.stores {
		st.cache = confined.NewHashCache(func() time.Time { return later })
	}
}

// FilesHashed returns how many files the session's scans have read, over
// all its stores.
func (s *Session) FilesHashed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, st := range s.stores {
		n += st.cache.Reads()
	}
	return n
}

// EndTimeout is the bound of each of End's steps.
func (s *Session) EndTimeout() time.Duration { return s.endTimeout }

// Crash abandons the session the way a killed worker does: nothing more is
// synced, flushed or removed, and the locks its process held are released
// (the kernel's part when a process dies).
func (s *Session) Crash() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	for _, st := range s.stores {
		if st.lock != nil {
			st.lock.Close()
			st.lock = nil
		}
	}
}

// Phases returns each store's phase, by name, in store order.
func (s *Session) Phases() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.stores))
	for i, st := range s.stores {
		out[i] = st.phase.String()
	}
	return out
}

// BootID is the boot an unflushed journal is marked with.
func BootID() string { return bootID() }
