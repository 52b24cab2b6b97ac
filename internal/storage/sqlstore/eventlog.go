package sqlstore

import (
	"container/list"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/webhooks"
)

// eventLog is a prefix of a session's log, oldest first: every event up to
// and including sequence number seq.
type eventLog struct {
	seq    int64
	events []api.Event
	// resources are the session's, when resourcesKnown.
	resources      []api.SessionResource
	resourcesKnown bool
	// row is the session's row as the append that made this log wrote it,
	// nil when not known.
	row *sessionRow
	// seen is what that append read beside the log (the clock aside):
	// what a backend may guess the next append reads (SessionGuess).
	seen logTail
}

// sessionRow is a session row's body as stored and the session it
// decodes to (without resources). An append reads the row with its
// session's lock, and the body it finds is usually the one this server's
// last append to the session wrote: it is compared, byte for byte, instead
// of decoded again (a twentieth of a send's CPU, spent in the batch every
// append of a shard waits for). The session is shared by every view made
// from it, as the log's events are: a view is read, never changed in place.
type sessionRow struct {
	body    string
	session api.Session
}

// logCache's bounds. It keeps the sessions used last: a cache of 64 that
// forgot one at random made a server with 64 busy sessions read a whole
// log again on 16–50 % of their appends (docs/postgresql-performance.md).
// It keeps at least minCachedLogs sessions whatever their logs' length (a
// long session read whole on every append is what the cache is for), and
// up to maxCachedLogs while their events number maxCachedEvents or fewer
// in all. The events are counted, not their bytes, nor the room after a
// log kept to lend: the bound on memory is a rough one.
const (
	minCachedLogs   = 64
	maxCachedLogs   = 1024
	maxCachedEvents = 1 << 16
)

// logCache keeps the decoded logs of the sessions appended to last.
// AppendEvents hands the runtime a session's whole log, and decoding it from
// the database on every append made the cost of a session grow with the
// square of its length (a script of 1,000 tool calls took 20 s of appends).
// With the cache, an append decodes only what was committed since.
//
// An entry is only ever put after the transaction that read it committed,
// and a reader still asks the database for every event after the entry's
// seq: an entry that is behind (another process appended, or a put lost a
// race) costs a longer query, never a missing or a doubled event. That
// holds across servers too: a session's events are appended under its row
// lock, so their sequence numbers grow in commit order.
type logCache struct {
	mu      sync.Mutex
	entries map[string]*list.Element // of *cachedLog
	// used orders the entries, the one got or put last first; events
	// counts theirs.
	used   list.List
	events int
}

// cachedLog is a cache entry. The array behind its events usually has room
// after them; lent says that room was handed to an appender already.
type cachedLog struct {
	sessionID string
	eventLog
	lent bool
}

// get returns the cached prefix of a session's log (empty when none).
// Its slice is clipped, so that a caller's append copies instead of
// writing into the cached array — except for the first appender after a
// put (appender), which is lent the array's room: copying a long log on
// every append was a tenth of a send's CPU. That room is written only by
// the one it is lent to (nobody else holds a slice reaching into it), and
// what it writes is seen by others only once it puts its own longer log.
func (c *logCache) get(sessionID string, appender bool) eventLog {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.entries[sessionID]
	if el == nil {
		return eventLog{}
	}
	c.used.MoveToFront(el)
	e := el.Value.(*cachedLog)
	l := e.eventLog
	if appender && !e.lent {
		e.lent = true
	} else {
		l.events = slices.Clip(l.events)
	}
	l.resources = slices.Clip(l.resources)
	return l
}

// put remembers a committed log unless a longer one is already cached,
// then forgets the sessions used longest ago while the cache is over its
// bounds. The room after l's events must be nobody's: put takes it over,
// to lend it.
func (c *logCache) put(sessionID string, l eventLog) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]*list.Element{}
	}
	el := c.entries[sessionID]
	switch {
	case el == nil:
		el = c.used.PushFront(&cachedLog{sessionID: sessionID, eventLog: l})
		c.entries[sessionID] = el
	case el.Value.(*cachedLog).seq >= l.seq:
		c.used.MoveToFront(el)
		return
	default:
		c.events -= len(el.Value.(*cachedLog).events)
		el.Value = &cachedLog{sessionID: sessionID, eventLog: l}
		c.used.MoveToFront(el)
	}
	c.events += len(l.events)
	for c.used.Len() > maxCachedLogs || (c.used.Len() > minCachedLogs && c.events > maxCachedEvents) {
		c.remove(c.used.Back())
	}
}

// drop forgets a session (deleted, or terminated: it will not react again).
func (c *logCache) drop(sessionID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.entries[sessionID]; el != nil {
		c.remove(el)
	}
}

// remove forgets entry el; c.mu is held.
func (c *logCache) remove(el *list.Element) {
	e := c.used.Remove(el).(*cachedLog)
	delete(c.entries, e.sessionID)
	c.events -= len(e.events)
}

// logTail is what a session's view reads besides its log, in the same
// statement (each was a statement of its own).
type logTail struct {
	// workLive says a live work item (workqueue.Live: not stopped) serves
	// the session.
	workLive bool
	// noEndpoints says no webhook endpoint is enabled: emit need not read
	// them.
	noEndpoints bool
	// clock is the database's clock (Dialect.Clock), nil without one.
	clock *time.Time
}

// sessionLog returns a session's whole log — the cached prefix l and
// whatever q sees after it — and its tail, in one statement.
func (s *Store) sessionLog(ctx context.Context, q Conn, sessionID string, l eventLog) (eventLog, logTail, error) {
	query, args := logTailQuery(sessionID, l.seq, s.d.Clock)
	rows, err := q.Query(ctx, query+` ORDER BY 1`, args...)
	if err != nil {
		return eventLog{}, logTail{}, err
	}
	return readLogTail(rows, l)
}

// logTailQuery selects (seq, body, at): the events of a session after
// sequence number after, and the tail as the row of sequence number 0.
// clock is Dialect.Clock.
func logTailQuery(sessionID string, after int64, clock string) (string, []any) {
	if clock == "" {
		clock = "NULL"
	}
	return `SELECT seq, body, NULL AS at FROM session_events WHERE session_id = ? AND seq > ?
		UNION ALL SELECT 0,
			CASE WHEN EXISTS (SELECT 1 FROM work_items WHERE session_id = ? AND state != ?) THEN 'w' ELSE '' END ||
			CASE WHEN EXISTS (SELECT 1 FROM webhook_endpoints WHERE state = ?) THEN 'h' ELSE '' END, ` + clock,
		[]any{sessionID, after, sessionID, api.WorkStopped, webhooks.StateEnabled}
}

// readLogTail appends the events of rows (logTailQuery's, in order of
// seq, after the columns of first) to l, and closes them.
func readLogTail(rows Rows, l eventLog, first ...any) (eventLog, logTail, error) {
	defer rows.Close()
	var tail logTail
	for rows.Next() {
		var (
			seq  int64
			body string
			at   *time.Time
		)
		if err := rows.Scan(append(first, &seq, &body, &at)...); err != nil {
			return eventLog{}, logTail{}, err
		}
		if seq == 0 {
			tail = logTail{workLive: strings.Contains(body, "w"), noEndpoints: !strings.Contains(body, "h"), clock: at}
			continue
		}
		var e api.Event
		if err := json.Unmarshal([]byte(body), &e); err != nil {
			return eventLog{}, logTail{}, err
		}
		l.seq = seq
		l.events = append(l.events, e)
	}
	return l, tail, rows.Err()
}
