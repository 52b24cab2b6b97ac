package app

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// A session's followers (the API's SSE streams) share one reader of its
// log: a logHub reads each new event once, encodes it once and keeps the
// latest ones in a ring, and every follower takes what it has not yet
// sent from there. Each follower used to read every event from the
// database itself, so one append to a session with a thousand followers
// was a thousand queries, and its fan-out took seconds.
//
// A follower keeps only its position (the last sequence it sent). One
// that fell behind the ring — slow, or resuming from an old Last-Event-ID
// — reads from the database itself from that position until it reaches
// the ring, so nothing is lost or reordered, and no follower holds a
// buffer of its own.

const (
	// followBatch is how many events a follower or a hub reads per query
	// while it catches up.
	followBatch = 500
	// DefaultFollowRing and ringBytes bound a hub's ring: the events a
	// follower may be behind by and still read from memory.
	DefaultFollowRing = 1024
	ringBytes         = 4 << 20
	// logRecheck bounds how long a hub can miss an append nothing woke it
	// for: it reads the log at least this often.
	logRecheck = 5 * time.Second
)

// FollowedEvent is one event of a followed log, encoded once for every
// follower.
type FollowedEvent struct {
	Seq int64
	// Frame is the event as one Server-Sent Events frame: its id, its
	// type as the event name, and its JSON on one data line (JSON escapes
	// newlines, so one line holds it).
	Frame []byte
}

// logHub reads one session's log for all of its followers.
type logHub struct {
	sessionID string
	stop      chan struct{}
	refs      int // guarded by Sessions.hubsMu

	mu sync.Mutex
	// ring holds every event with a sequence in (start, last], oldest
	// first (it may be empty).
	ring        []FollowedEvent
	ringSize    int
	start, last int64
	// changed is closed, and replaced, whenever last moves or err changes;
	// woken also at every wake of the session, with or without an event.
	changed, woken chan struct{}
	// err is the hub's last read failure (storage.ErrNotFound: the session
	// is gone); while it is set, followers read the database themselves.
	err error
}

// Follower follows one session's log from a position on. It is used by one
// goroutine.
type Follower struct {
	s     *Sessions
	h     *logHub
	after int64
}

// Follow starts following a session's log after sequence after (0: from
// the first event). Close it when done.
func (s *Sessions) Follow(sessionID string, after int64) *Follower {
	s.hubsMu.Lock()
	h := s.hubs[sessionID]
	if h == nil {
		h = &logHub{sessionID: sessionID, stop: make(chan struct{}), start: after, last: after, changed: make(chan struct{}), woken: make(chan struct{})}
		s.hubs[sessionID] = h
		go s.readLog(h, s.app.cfg.FollowRing)
	}
	h.refs++
	s.hubsMu.Unlock()
	return &Follower{s: s, h: h, after: after}
}

// Close stops following; the last follower of a session stops its hub.
func (f *Follower) Close() {
	f.s.hubsMu.Lock()
	defer f.s.hubsMu.Unlock()
	f.h.refs--
	if f.h.refs == 0 {
		delete(f.s.hubs, f.h.sessionID)
		close(f.h.stop)
	}
}

// Changed returns a channel closed when the log may hold events Next has
// not returned; take it before calling Next, so nothing slips between.
func (f *Follower) Changed() <-chan struct{} {
	f.h.mu.Lock()
	defer f.h.mu.Unlock()
	return f.h.changed
}

// Woken is Changed, closed also when the session was woken without a new
// event (its work item stopped, say): for a follower that must then check
// that its credential still works. Most followers need not wake for that.
func (f *Follower) Woken() <-chan struct{} {
	f.h.mu.Lock()
	defer f.h.mu.Unlock()
	return f.h.woken
}

// Next returns the events after the follower's position, oldest first, at
// most followBatch, and moves past them; more says that there are others
// to take at once. It returns storage.ErrNotFound when the session is gone.
func (f *Follower) Next(ctx context.Context) (events []FollowedEvent, more bool, err error) {
	h := f.h
	h.mu.Lock()
	if h.err == nil && f.after >= h.start {
		i := sort.Search(len(h.ring), func(i int) bool { return h.ring[i].Seq > f.after })
		events = slices.Clone(h.ring[i:min(len(h.ring), i+followBatch)])
		more = i+len(events) < len(h.ring)
		h.mu.Unlock()
	} else {
		gone := errors.Is(h.err, storage.ErrNotFound)
		h.mu.Unlock()
		if gone {
			return nil, false, storage.ErrNotFound
		}
		// Behind the ring, or the hub cannot read: from the database.
		stored, err := f.s.app.store.ListEvents(ctx, h.sessionID, storage.EventQuery{AfterSeq: f.after, Limit: followBatch})
		if err != nil {
			return nil, false, err
		}
		if events, err = encodeEvents(stored); err != nil {
			return nil, false, err
		}
		more = len(stored) == followBatch
	}
	if len(events) > 0 {
		f.after = events[len(events)-1].Seq
	}
	return events, more, nil
}

// readLog is a hub's reader: it reads what was appended after the hub's
// last event whenever the session's log is woken (or every logRecheck),
// until the hub's last follower leaves.
func (s *Sessions) readLog(h *logHub, ring int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-h.stop
		cancel()
	}()
	recheck := time.NewTimer(logRecheck)
	defer recheck.Stop()
	// woken: the read follows a wake, which is passed on to Woken even
	// when no event came (a stopped work item ends its token's streams).
	woken := true
	for {
		wake := s.streams.wait(h.sessionID)
		h.mu.Lock()
		after := h.last
		h.mu.Unlock()
		stored, err := s.app.store.ListEvents(ctx, h.sessionID, storage.EventQuery{AfterSeq: after, Limit: followBatch})
		var events []FollowedEvent
		if err == nil {
			events, err = encodeEvents(stored)
		}
		if ctx.Err() != nil {
			return
		}
		h.publish(events, err, woken, ring)
		if errors.Is(err, storage.ErrNotFound) {
			return
		}
		if err != nil {
			s.app.log.Error("reading a session's log for its followers failed; they read it themselves until it works again", "session_id", h.sessionID, "err", err)
		}
		if err == nil && len(stored) == followBatch {
			continue
		}
		recheck.Reset(logRecheck)
		select {
		case <-wake:
			woken = true
		case <-recheck.C:
			woken = false
		case <-h.stop:
			return
		}
	}
}

// publish adds what the hub read to its ring and wakes the followers:
// Changed when something changed, Woken also after any wake.
func (h *logHub) publish(events []FollowedEvent, err error, woken bool, ring int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if woken {
		close(h.woken)
		h.woken = make(chan struct{})
	}
	if len(events) == 0 && err == nil && h.err == nil {
		return
	}
	h.err = err
	h.ring = append(h.ring, events...)
	for _, e := range events {
		h.ringSize += len(e.Frame)
	}
	if len(events) > 0 {
		h.last = events[len(events)-1].Seq
	}
	drop := 0
	for drop < len(h.ring) && (len(h.ring)-drop > ring || h.ringSize > ringBytes) {
		h.ringSize -= len(h.ring[drop].Frame)
		h.start = h.ring[drop].Seq
		drop++
	}
	// The dropped events stay in the array until append moves the ring
	// to a new one, which copies only the kept events (followers take
	// copies of what they read, see Next).
	h.ring = h.ring[drop:]
	close(h.changed)
	h.changed = make(chan struct{})
	if !woken {
		close(h.woken)
		h.woken = make(chan struct{})
	}
}

// SSEFrame is event as the API's event stream sends it.
func SSEFrame(e api.Event) ([]byte, error) {
	data, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	frame := make([]byte, 0, len(data)+len(e.ID)+len(e.Type)+24)
	frame = append(frame, "id: "...)
	frame = append(frame, e.ID...)
	frame = append(frame, "\nevent: "...)
	frame = append(frame, e.Type...)
	frame = append(frame, "\ndata: "...)
	frame = append(frame, data...)
	return append(frame, "\n\n"...), nil
}

func encodeEvents(stored []storage.StoredEvent) ([]FollowedEvent, error) {
	out := make([]FollowedEvent, len(stored))
	for i, e := range stored {
		frame, err := SSEFrame(e.Event)
		if err != nil {
			return nil, err
		}
		out[i] = FollowedEvent{Seq: e.Seq, Frame: frame}
	}
	return out, nil
}
