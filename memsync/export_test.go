package memsync

import (
	"context"
	"testing"

	"github.com/memstore/memstore/confined"
)

// ApplyActions runs actions on the session's first store the way a sync
// runs a plan's, and returns the state it leaves. Tests use it to stage the
// races a real sync cannot time: a file edited, or a memory changed, between
// the plan and the action.
func (s *Session) ApplyActions(ctx context.Context, actions []Action) State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stores[0]
	a := st.newApplier(st.state.Clone())
	a.apply(ctx, actions)
	st.state = a.next
	return st.state.Clone()
}

// StoreState returns the session's first store's state.
func (s *Session) StoreState() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stores[0].state.Clone()
}

// PretendCaseInsensitive makes every mount until the test ends believe its
// filesystem ignores letter case.
func PretendCaseInsensitive(t *testing.T) {
	old := probeCaseInsensitive
	probeCaseInsensitive = func(*confined.Root) (bool, error) { return true, nil }
	t.Cleanup(func() { probeCaseInsensitive = old })
}
