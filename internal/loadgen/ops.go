package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

// changesWait is how long a changes.poll waits for a change: its latency
// is the time to the next write to the store, or this.
const changesWait = time.Second

// claimBlock is how long a work.claim waits for an item to claim (the API allows under a second).
const claimBlock = 900 * time.Millisecond

// listLimit is the page size of memory.list and version.list.
const listLimit = 20

// errNoWork is a work.claim that found no item to claim.
var errNoWork = errors.New("no work item to claim")

// worker is one goroutine of the measured phase.
type worker struct {
	fx      *fixture
	rec     *recorder
	id      int
	n       int
	rnd     *rand.Rand
	content int
}

// do runs one operation and records it, unless the run ended while it was
// in flight (a request cut by the deadline measures nothing). It returns
// the operation's error.
func (w *worker) do(ctx context.Context, op string) error {
	start := time.Now()
	took, err := w.call(ctx, op, start)
	if ctx.Err() != nil {
		return nil
	}
	if took == 0 {
		took = time.Since(start)
	}
	w.rec.record(op, took, err)
	return err
}

// call performs op. It returns the latency to record when only part of
// what it did is the measured request (0: all of it).
func (w *worker) call(ctx context.Context, op string, start time.Time) (time.Duration, error) {
	c := w.fx.admin
	st := w.fx.stores[w.rnd.IntN(len(w.fx.stores))]
	switch op {
	case OpMemoryCreate:
		w.n++
		path := fmt.Sprintf("/bench/w%d/%d-%x.md", w.id, w.n, w.rnd.Uint32())
		m, err := c.CreateMemory(ctx, st.id, api.CreateMemoryRequest{Path: path, Content: Content(w.content, path, 1)})
		if err == nil {
			st.add(m.ID)
		}
		return 0, err
	case OpMemoryUpdate:
		id := st.pick(w.rnd)
		text := Content(w.content, id, w.n)
		_, err := c.UpdateMemory(ctx, st.id, id, api.UpdateMemoryRequest{Content: &text})
		return 0, err
	case OpMemoryGet:
		_, err := c.GetMemory(ctx, st.id, st.pick(w.rnd), client.GetMemoryParams{View: api.ViewFull})
		return 0, err
	case OpMemoryList:
		_, err := c.ListMemories(ctx, st.id, client.ListMemoriesParams{Limit: listLimit})
		return 0, err
	case OpVersionList:
		_, err := c.ListMemoryVersions(ctx, st.id, client.ListMemoryVersionsParams{MemoryID: st.pick(w.rnd), Limit: listLimit})
		return 0, err
	case OpChangesPoll:
		after := st.cursor.Load()
		l, err := c.ListChanges(ctx, st.id, client.ListChangesParams{After: after, Wait: changesWait, Limit: 100})
		if err == nil {
			for cur := st.cursor.Load(); l.LatestSequence > cur && !st.cursor.CompareAndSwap(cur, l.LatestSequence); cur = st.cursor.Load() {
			}
		}
		return 0, err
	case OpSnapshot:
		return 0, readSnapshot(ctx, c, st.id)
	case OpEventAppend:
		sid := w.fx.eventSessions[w.rnd.IntN(len(w.fx.eventSessions))]
		_, err := c.SendEvents(ctx, sid, api.UserMessage(benchMessage+strconv.FormatInt(time.Now().UnixNano(), 10)))
		return 0, err
	case OpWorkClaim:
		return w.claim(ctx)
	}
	return 0, fmt.Errorf("unknown operation %q", op)
}

// claim queues an item (a new session in the work environment), then
// measures the poll that claims one, then stops what it claimed so the
// queue does not grow. Only the poll is the measured request.
func (w *worker) claim(ctx context.Context) (time.Duration, error) {
	fx := w.fx
	s, err := fx.admin.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: fx.agentID}, EnvironmentID: fx.workEnvID, Title: ptr("memstore bench work")})
	if err != nil {
		return 0, err
	}
	fx.mu.Lock()
	fx.claimSessions = append(fx.claimSessions, s.ID)
	fx.mu.Unlock()
	start := time.Now()
	item, err := fx.worker.PollWork(ctx, fx.workEnvID, api.WorkPollParams{BlockMS: int(claimBlock.Milliseconds())})
	took := time.Since(start)
	switch {
	case err != nil:
		return took, err
	case item == nil:
		return took, errNoWork
	}
	return took, fx.admin.StopWork(ctx, fx.workEnvID, item.ID, api.StopWorkRequest{Force: true})
}

// readSnapshot reads a whole snapshot of a store, content included.
func readSnapshot(ctx context.Context, c *client.Client, storeID string) error {
	s, err := c.Snapshot(ctx, storeID, "")
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		_, r, err := s.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, r); err != nil {
			return err
		}
	}
}
