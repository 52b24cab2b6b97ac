package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/webhooks"
)

// ---- stores ----

const storeColumns = `id, name, description, metadata, created_at, updated_at, archived_at, version_retention, pruned_through`

func scanStore(row Row) (storage.MemoryStoreRow, error) {
	var (
		st       storage.MemoryStoreRow
		meta     string
		archived *time.Time
		policy   *string
	)
	if err := row.Scan(&st.ID, &st.Name, &st.Description, &meta, &st.CreatedAt, &st.UpdatedAt, &archived, &policy, &st.PrunedThrough); err != nil {
		return st, err
	}
	st.ArchivedAt = deref(archived)
	if err := scanRetention(&st, policy); err != nil {
		return st, err
	}
	if err := json.Unmarshal([]byte(meta), &st.Metadata); err != nil {
		return st, fmt.Errorf("memory store %s: metadata: %w", st.ID, err)
	}
	if st.Metadata == nil {
		st.Metadata = map[string]string{}
	}
	return st, nil
}

func (s *Store) getStore(ctx context.Context, q Conn, id string, lock bool) (storage.MemoryStoreRow, error) {
	return scanStore(q.QueryRow(ctx, `SELECT `+storeColumns+` FROM memory_stores WHERE id = ?`+s.lock(lock), id))
}

// CreateMemoryStore implements storage.MemoryStores.
func (s *Store) CreateMemoryStore(ctx context.Context, in storage.NewMemoryStore) (storage.MemoryStoreRow, error) {
	var st storage.MemoryStoreRow
	err := s.write(ctx, func(tx *tx) error {
		now, err := s.b.Now(ctx, tx)
		if err != nil {
			return err
		}
		id := ids.NewAt(ids.MemoryStore, now)
		if _, err := tx.Exec(ctx, `INSERT INTO memory_stores (id, name, description, metadata, version_retention, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			id, in.Name, in.Description, metadataJSON(in.Metadata), retentionColumn(in.Retention), now, now); err != nil {
			return fmt.Errorf("create memory store: %w", err)
		}
		if err := tx.emit(ctx, webhooks.Of(webhooks.MemoryStoreCreated, id)); err != nil {
			return err
		}
		st, err = s.getStore(ctx, tx, id, false)
		return err
	})
	return st, err
}

// GetMemoryStore implements storage.MemoryStores.
func (s *Store) GetMemoryStore(ctx context.Context, id string) (storage.MemoryStoreRow, error) {
	return s.getStore(ctx, s.db(), id, false)
}

// ListMemoryStores implements storage.MemoryStores. Ids sort by creation
// time, so id order is newest first and the last id seen is the cursor.
func (s *Store) ListMemoryStores(ctx context.Context, q storage.MemoryStoreQuery) (storage.Page[storage.MemoryStoreRow], error) {
	var (
		page  storage.Page[storage.MemoryStoreRow]
		a     args
		where = []string{"1 = 1"}
	)
	if q.Cursor != "" {
		after, err := storage.DecodeCursor(storage.CursorMemoryStores, q.Cursor)
		if err != nil {
			return page, err
		}
		where = append(where, "id < "+a.add(after))
	}
	if !q.IncludeArchived {
		where = append(where, "archived_at IS NULL")
	}
	if q.CreatedGTE != nil {
		where = append(where, "created_at >= "+a.add(*q.CreatedGTE))
	}
	if q.CreatedLTE != nil {
		where = append(where, "created_at <= "+a.add(*q.CreatedLTE))
	}
	limit := storage.ListLimit(q.Limit)
	var err error
	page.Items, err = queryAll(ctx, s.db(), scanStore, `SELECT `+storeColumns+` FROM memory_stores WHERE `+strings.Join(where, " AND ")+` ORDER BY id DESC LIMIT `+a.add(limit+1), a...)
	if err != nil {
		return page, fmt.Errorf("list memory stores: %w", err)
	}
	if len(page.Items) > limit {
		page.Items = page.Items[:limit]
		page.Next = storage.EncodeCursor(storage.CursorMemoryStores, page.Items[limit-1].ID)
	}
	return page, nil
}

// UpdateMemoryStore implements storage.MemoryStores.
func (s *Store) UpdateMemoryStore(ctx context.Context, id string, p storage.MemoryStorePatch) (storage.MemoryStoreRow, error) {
	var st storage.MemoryStoreRow
	err := s.write(ctx, func(tx *tx) error {
		cur, err := s.getStore(ctx, tx, id, true)
		if err != nil {
			return err
		}
		next, changed, err := storage.ApplyStorePatch(cur, p)
		if err != nil {
			return err
		}
		if !changed {
			st = cur
			return nil
		}
		now, err := s.b.Now(ctx, tx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE memory_stores SET name = ?, description = ?, metadata = ?, version_retention = ?, updated_at = ? WHERE id = ?`,
			next.Name, next.Description, metadataJSON(next.Metadata), retentionColumn(next.Retention), now, id); err != nil {
			return fmt.Errorf("update memory store %s: %w", id, err)
		}
		st, err = s.getStore(ctx, tx, id, false)
		return err
	})
	return st, err
}

// ArchiveMemoryStore implements storage.MemoryStores.
func (s *Store) ArchiveMemoryStore(ctx context.Context, id string) (storage.MemoryStoreRow, error) {
	var st storage.MemoryStoreRow
	err := s.write(ctx, func(tx *tx) error {
		now, err := s.b.Now(ctx, tx)
		if err != nil {
			return err
		}
		n, err := tx.Exec(ctx, `UPDATE memory_stores SET archived_at = ?, updated_at = ? WHERE id = ? AND archived_at IS NULL`, now, now, id)
		if err != nil {
			return fmt.Errorf("archive memory store %s: %w", id, err)
		}
		if n == 1 {
			if err := tx.emit(ctx, webhooks.Of(webhooks.MemoryStoreArchived, id)); err != nil {
				return err
			}
		}
		st, err = s.getStore(ctx, tx, id, false)
		return err
	})
	return st, err
}

// DeleteMemoryStore implements storage.MemoryStores. The store's row lock
// waits for sessions being created with it attached (they hold it shared),
// so the in-use check sees them; the foreign keys cascade to the store's
// memories and versions. A claimed work item that is not stopped is a
// worker that may still sync the store; an unclaimed one of a terminated
// session will only be stopped by the worker that claims it.
func (s *Store) DeleteMemoryStore(ctx context.Context, id string) error {
	return s.write(ctx, func(tx *tx) error {
		if _, err := s.getStore(ctx, tx, id, true); err != nil {
			return err
		}
		var inUse storage.StoreInUseError
		err := tx.QueryRow(ctx, `SELECT s.id, s.status FROM session_resources r JOIN sessions s ON s.id = r.session_id
			WHERE r.memory_store_id = ? AND (s.status != 'terminated' OR EXISTS (
				SELECT 1 FROM work_items w WHERE w.session_id = s.id AND w.state != 'stopped' AND w.claimed_at IS NOT NULL))
			ORDER BY s.id LIMIT 1`, id).Scan(&inUse.SessionID, &inUse.Status)
		switch {
		case err == nil:
			return &inUse
		case !errors.Is(err, storage.ErrNotFound):
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM memory_stores WHERE id = ?`, id); err != nil {
			return fmt.Errorf("delete memory store %s: %w", id, err)
		}
		return tx.emit(ctx, webhooks.Of(webhooks.MemoryStoreDeleted, id))
	})
}

// MemoryStoreUsage implements storage.MemoryStores: one walk of the
// prefix's key range of the path index.
func (s *Store) MemoryStoreUsage(ctx context.Context, storeID, prefix string) (storage.StoreUsage, error) {
	var u storage.StoreUsage
	_, upper := storage.SubtreeRange(prefix)
	err := s.db().QueryRow(ctx, `SELECT count(m.id), coalesce(sum(m.content_size_bytes), 0), max(m.updated_at)
		FROM memory_stores st LEFT JOIN memories m ON m.store_id = st.id AND m.path >= ? AND m.path < ?
		WHERE st.id = ? GROUP BY st.id`, prefix, upper, storeID).Scan(&u.Memories, &u.Bytes, &u.LastChange)
	return u, err
}

// ---- memories ----

const memoryColumns = `m.id, m.store_id, m.path, m.content_sha256, m.content_size_bytes, m.version_id, m.created_at, m.updated_at`

// memoryWithContent selects a memory and its head version's content.
const memoryWithContent = `SELECT ` + memoryColumns + `, v.content FROM memories m JOIN memory_versions v ON v.id = m.version_id`

// selectMemory is the select of memoryColumns, with the content when
// withContent.
func selectMemory(withContent bool) string {
	if withContent {
		return memoryWithContent
	}
	return `SELECT ` + memoryColumns + ` FROM memories m`
}

func scanMemory(row Row, withContent bool) (storage.MemoryRow, error) {
	// One value holds every scan target: the addresses handed to Scan
	// make it escape, and a listing scans thousands of rows.
	var r struct {
		m       storage.MemoryRow
		content []byte
		dest    [9]any
	}
	m := &r.m
	r.dest = [9]any{&m.ID, &m.StoreID, &m.Path, &m.ContentSHA256, &m.ContentSizeBytes, &m.VersionID, &m.CreatedAt, &m.UpdatedAt, &r.content}
	dest := r.dest[:8]
	if withContent {
		dest = r.dest[:]
	}
	if err := row.Scan(dest...); err != nil {
		return *m, err
	}
	if withContent {
		c := string(r.content)
		m.Content = &c
	}
	return *m, nil
}

func getMemory(ctx context.Context, q Conn, storeID, memoryID string, withContent bool) (storage.MemoryRow, error) {
	return scanMemory(q.QueryRow(ctx, selectMemory(withContent)+` WHERE m.id = ? AND m.store_id = ?`, memoryID, storeID), withContent)
}

// writeMemory runs one memory write: through the backend's own way of
// running them, or in a write transaction ordered by the store's row lock.
// split, when not nil, is the search entry the write will most likely
// store, computed before it waits its turn.
func (s *Store) writeMemory(ctx context.Context, storeID string, split *splitEntry, fn func(storage.MemoryTx) error) error {
	if w, ok := s.b.(MemoryWriter); ok {
		return w.WriteMemory(ctx, storeID, func(ctx context.Context, tx Conn, c StoreCounters) error {
			return fn(memoryTx{s: s, tx: tx, counters: c, split: split})
		})
	}
	return s.write(ctx, func(tx *tx) error {
		return fn(memoryTx{s: s, tx: tx, counters: rowCounters{s: s, tx: tx}, split: split})
	})
}

// splitEntry is a search entry (Dialect.Search.Entry) computed in the
// writer's goroutine: the batch that runs the write holds its stores'
// locks, and splitting 4 KB into words took about 4 % of the server's
// CPU, inside that batch, one write after another
// (docs/postgresql-performance.md).
type splitEntry struct {
	path, content string
	column        string
	value         any
}

// splitAhead is the search entry of path and content, for a write that
// will store them.
func (s *Store) splitAhead(path, content string) *splitEntry {
	column, value := s.d.Search.Entry(path, content)
	return &splitEntry{path: path, content: content, column: column, value: value}
}

// rowCounters are StoreCounters on the store's row, locked by Lock: it
// orders every write to the store, from every server, so the path checks,
// the precondition, the limit and the sequence see every earlier write and
// none in flight.
type rowCounters struct {
	s  *Store
	tx Conn
}

func (c rowCounters) Lock(ctx context.Context, storeID string) (storage.StoreState, error) {
	var (
		st       storage.StoreState
		archived *time.Time
	)
	err := c.tx.QueryRow(ctx, `SELECT memory_count, archived_at FROM memory_stores WHERE id = ?`+c.s.d.ForUpdate, storeID).Scan(&st.Memories, &archived)
	st.Archived = archived != nil
	return st, err
}

func (c rowCounters) Next(ctx context.Context, storeID string, delta int) (int64, error) {
	var seq int64
	err := c.tx.QueryRow(ctx, `UPDATE memory_stores SET last_sequence = last_sequence + 1, memory_count = memory_count + ? WHERE id = ? RETURNING last_sequence`, delta, storeID).Scan(&seq)
	return seq, err
}

// memoryTx is storage.MemoryTx in one write.
type memoryTx struct {
	s        *Store
	tx       Conn
	counters StoreCounters
	split    *splitEntry
}

func (t memoryTx) LockStore(ctx context.Context, storeID string) (storage.StoreState, error) {
	return t.counters.Lock(ctx, storeID)
}

// PathConflict implements storage.MemoryTx in one query: the path itself
// and each ancestor ("/a", "/a/b" for "/a/b/c") are point lookups on the
// (store_id, path) index, the first descendant a range seek on it. Each
// path is an equality of its own: with the paths as one IN list,
// PostgreSQL's cached plan for the statement, made while the table was
// small, read every memory of the store and kept only the listed paths, so
// a create cost time in proportion to its store's size (at 3,000 memories,
// 0.69 ms per path check against 0.03 for the lookups;
// docs/postgresql-performance.md).
// An equality on both columns of the unique index is one row whatever the
// statistics say, and is planned as a lookup.
func (t memoryTx) PathConflict(ctx context.Context, storeID, p, self string) error {
	query, args := PathConflictQuery(storeID, p, self)
	// The guess is no conflict, what nearly every write finds.
	if g := t.guesser(); g != nil && !t.touched(func(c *Changes) bool { return c.TouchesPath(storeID, p) }) {
		g.Expect(query, args)
		return nil
	}
	var id, at string
	err := errNotAhead
	if row, ch := t.ahead(query, args); row != nil && !ch.TouchesPath(storeID, p) {
		// A conflict read before the batch stands unless its memory has
		// changed since; no conflict stands unless a path it looks at
		// has been taken since.
		if err = row.Scan(&id, &at); err == nil && ch.TouchesMemory(id) {
			err = errNotAhead
		}
	}
	if errors.Is(err, errNotAhead) {
		err = t.tx.QueryRow(ctx, query, args...).Scan(&id, &at)
	}
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	return &storage.PathConflictError{Path: at, MemoryID: id}
}

// HeadCheckQuery is the read that checks a guess of memory memoryID of the
// store: it answers a row unless the memory's head is version versionID.
// The head is looked up in a subquery of its own, by the memory's key,
// which PostgreSQL runs as one index lookup per check: as NOT EXISTS, its
// plan for a batch's checks in one statement could instead hash every
// memory of the table (EXPLAIN of eight checks on a table of 3,000 narrow
// rows: a scan of all of them, 1.4 ms) (TestGuessChecksReadTheirRowsNotTheTable
// holds the lookups).
func HeadCheckQuery(storeID, memoryID, versionID string) (string, []any) {
	return `SELECT 1 WHERE (SELECT version_id FROM memories WHERE id = ? AND store_id = ?) IS DISTINCT FROM ?`, []any{memoryID, storeID, versionID}
}

// PathConflictQuery is PathConflict's query: the memory, other than self,
// at p, at an ancestor of p or under p (the first in that order), with
// "?" placeholders.
func PathConflictQuery(storeID, p, self string) (string, []any) {
	var (
		query strings.Builder
		args  []any
	)
	query.WriteString(`SELECT id, path FROM (
		SELECT id, path, 0 AS rank FROM memories WHERE store_id = ? AND path = ? AND id <> ?`)
	args = append(args, storeID, p, self)
	for _, a := range storage.Ancestors(p) {
		query.WriteString(`
		UNION ALL
		SELECT id, path, 1 FROM memories WHERE store_id = ? AND path = ? AND id <> ?`)
		args = append(args, storeID, a, self)
	}
	lo, hi := storage.SubtreeRange(p + "/")
	query.WriteString(`
		UNION ALL
		SELECT id, path, 2 FROM (SELECT id, path FROM memories WHERE store_id = ? AND id <> ? AND path >= ? AND path < ? ORDER BY path LIMIT 1) AS descendant
	) AS conflicts ORDER BY rank, path LIMIT 1`)
	args = append(args, storeID, self, lo, hi)
	return query.String(), args
}

func (t memoryTx) ReadMemory(ctx context.Context, storeID, memoryID string, withContent bool) (storage.MemoryRow, error) {
	// A guess is the memory as this server wrote it last: its head
	// version still being the one written says nothing else changed.
	if g := t.guesser(); g != nil && !withContent && !t.touched(func(c *Changes) bool { return c.TouchesMemory(memoryID) }) {
		if m, ok := t.s.heads.guess(memoryID); ok && m.StoreID == storeID {
			g.Expect(HeadCheckQuery(storeID, memoryID, m.VersionID))
			return m, nil
		}
	}
	query := selectMemory(withContent) + ` WHERE m.id = ? AND m.store_id = ?`
	if row, ch := t.ahead(query, []any{memoryID, storeID}); row != nil && !ch.TouchesMemory(memoryID) {
		return scanMemory(row, withContent)
	}
	return scanMemory(t.tx.QueryRow(ctx, query, memoryID, storeID), withContent)
}

// errNotAhead: the answer read ahead cannot be used; read again.
var errNotAhead = errors.New("read again")

// ahead is the answer to query read before the write's batch ran, with
// what the batch has changed since; nil when there is none.
func (t memoryTx) ahead(query string, args []any) (Row, *Changes) {
	ra, ok := t.tx.(ReadAhead)
	if !ok {
		return nil, nil
	}
	row, ok := ra.Ahead(query, args)
	if !ok {
		return nil, nil
	}
	return row, ra.Changes()
}

// guesser is the transaction's Guesser when the running write may guess
// its reads; nil otherwise.
func (t memoryTx) guesser() Guesser {
	if g, ok := t.tx.(Guesser); ok && g.Guessing() {
		return g
	}
	return nil
}

// touched reports whether the transaction's earlier writes may bear on a
// read, by what touches says of their Changes; true when it keeps none.
func (t memoryTx) touched(touches func(*Changes) bool) bool {
	ra, ok := t.tx.(ReadAhead)
	return !ok || touches(ra.Changes())
}

// changed notes what the write changes, for the reads ahead of the writes
// after it.
func (t memoryTx) changed(note func(*Changes)) {
	if ra, ok := t.tx.(ReadAhead); ok {
		note(ra.Changes())
	}
}

// exec runs a statement whose row count the write does not look at: sent
// with the next read or the COMMIT when the Conn can defer it, at once
// otherwise.
func (t memoryTx) exec(ctx context.Context, query string, args ...any) error {
	if d, ok := t.tx.(Deferrer); ok {
		d.Defer(ctx, query, args...)
		return nil
	}
	_, err := t.tx.Exec(ctx, query, args...)
	return err
}

func (t memoryTx) Now(ctx context.Context) (time.Time, error) { return t.s.b.Now(ctx, t.tx) }

// AddVersion implements storage.MemoryTx under the store's next sequence.
func (t memoryTx) AddVersion(ctx context.Context, v storage.VersionRow, delta int) error {
	seq, err := t.counters.Next(ctx, v.StoreID, delta)
	if err != nil {
		return fmt.Errorf("take the next change sequence of memory store %s: %w", v.StoreID, err)
	}
	var (
		content any // NULL, not an empty value, when there is none
		sha     *string
		size    *int64
	)
	if v.HasContent() {
		content, sha, size = contentBytes(v.Content), &v.ContentSHA256, &v.ContentSizeBytes
	}
	err = t.exec(ctx, `INSERT INTO memory_versions (id, store_id, memory_id, operation, path, content, content_sha256, content_size_bytes, created_at, created_by_type, created_by_id, sequence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v.ID, v.StoreID, v.MemoryID, v.Operation, v.Path, content, sha, size, v.CreatedAt, v.CreatedBy.Kind, v.CreatedBy.ID, seq)
	if err != nil {
		return fmt.Errorf("write memory version: %w", err)
	}
	return nil
}

// contentBytes is a version's content as the bytes its column takes,
// sharing the string's memory: drivers only read their arguments, and a
// copy of every write's content was garbage once encoded. An empty content
// is an empty, not a nil, slice: a nil one would be written as NULL.
func contentBytes(s string) []byte {
	if s == "" {
		return []byte{}
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

func (t memoryTx) InsertMemory(ctx context.Context, m storage.MemoryRow) error {
	t.changed(func(c *Changes) { c.Memory(m.ID); c.Path(m.StoreID, m.Path) })
	insert := `INSERT INTO memories (id, store_id, path, content_sha256, content_size_bytes, version_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	args := []any{m.ID, m.StoreID, m.Path, m.ContentSHA256, m.ContentSizeBytes, m.VersionID, m.CreatedAt, m.UpdatedAt}
	if column, value := t.searchEntry(m); column != "" {
		insert = `INSERT INTO memories (id, store_id, path, content_sha256, content_size_bytes, version_id, created_at, updated_at, ` + column + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
		args = append(args, value)
	}
	if err := t.exec(ctx, insert, args...); err != nil {
		return fmt.Errorf("create memory: %w", err)
	}
	return nil
}

// UpdateMemory implements storage.MemoryTx. Setting path, even to the same
// value, rewrites the memory's entry in the path index; most updates
// change content only.
func (t memoryTx) UpdateMemory(ctx context.Context, m storage.MemoryRow, moved bool) error {
	update := `UPDATE memories SET content_sha256 = ?, content_size_bytes = ?, version_id = ?, updated_at = ? WHERE id = ?`
	args := []any{m.ContentSHA256, m.ContentSizeBytes, m.VersionID, m.UpdatedAt, m.ID}
	if moved {
		update = `UPDATE memories SET path = ?, content_sha256 = ?, content_size_bytes = ?, version_id = ?, updated_at = ? WHERE id = ?`
		args = append([]any{m.Path}, args...)
	}
	if column, value := t.searchEntry(m); column != "" {
		update = strings.Replace(update, ` WHERE id = ?`, `, `+column+` = ? WHERE id = ?`, 1)
		args = slices.Insert(args, len(args)-1, value)
	}
	t.changed(func(c *Changes) {
		c.Memory(m.ID)
		if moved {
			c.Path(m.StoreID, m.Path)
		}
	})
	if err := t.exec(ctx, update, args...); err != nil {
		return fmt.Errorf("update memory %s: %w", m.ID, err)
	}
	return nil
}

// searchEntry is the search index's entry for m's path and head content
// when the backend has the server compute it (Dialect.Search.Entry); a
// row written without its content leaves it to the backend's trigger.
func (t memoryTx) searchEntry(m storage.MemoryRow) (string, any) {
	if m.Content == nil {
		return "", nil
	}
	if e := t.split; e != nil && e.path == m.Path && e.content == *m.Content {
		return e.column, e.value
	}
	return t.s.d.Search.Entry(m.Path, *m.Content)
}

func (t memoryTx) DeleteMemory(ctx context.Context, memoryID string) error {
	t.changed(func(c *Changes) { c.Memory(memoryID) })
	if err := t.exec(ctx, `DELETE FROM memories WHERE id = ?`, memoryID); err != nil {
		return fmt.Errorf("delete memory %s: %w", memoryID, err)
	}
	return nil
}

func (t memoryTx) ReadVersion(ctx context.Context, storeID, versionID string) (storage.VersionRow, error) {
	return getVersion(ctx, t.tx, storeID, versionID)
}

func (t memoryTx) IsHead(ctx context.Context, memoryID, versionID string) (bool, error) {
	return exists(ctx, t.tx, `SELECT 1 FROM memories WHERE id = ? AND version_id = ?`, memoryID, versionID)
}

func (t memoryTx) Redact(ctx context.Context, versionID string, at time.Time, by storage.Actor) error {
	t.changed((*Changes).Everything)
	if err := t.exec(ctx, `UPDATE memory_versions SET path = NULL, content = NULL, content_sha256 = NULL, content_size_bytes = NULL, redacted_at = ?, redacted_by_type = ?, redacted_by_id = ? WHERE id = ?`,
		at, by.Kind, by.ID, versionID); err != nil {
		return fmt.Errorf("redact memory version %s: %w", versionID, err)
	}
	return nil
}

// CreateMemory implements storage.Memories. The content is hashed and its
// search words split here, in the caller's goroutine, before the write
// waits its turn.
func (s *Store) CreateMemory(ctx context.Context, in storage.NewMemory) (storage.MemoryRow, error) {
	sha := in.ContentSHA256()
	var m storage.MemoryRow
	split := s.splitAhead(in.Path, in.Content)
	err := s.writeMemory(ctx, in.StoreID, split, func(tx storage.MemoryTx) (err error) {
		m, err = storage.CreateMemoryIn(ctx, tx, in, sha)
		return err
	})
	s.noteHead(m, err)
	return m, err
}

// GetMemory implements storage.Memories.
func (s *Store) GetMemory(ctx context.Context, storeID, memoryID string) (storage.MemoryRow, error) {
	return getMemory(ctx, s.db(), storeID, memoryID, true)
}

// GetMemoryAt implements storage.Memories.
func (s *Store) GetMemoryAt(ctx context.Context, storeID, path string) (storage.MemoryRow, error) {
	return scanMemory(s.db().QueryRow(ctx, selectMemory(true)+` WHERE m.store_id = ? AND m.path = ?`, storeID, path), true)
}

// noteHead remembers a memory written without error.
func (s *Store) noteHead(m storage.MemoryRow, err error) {
	if err == nil && s.keepHeads {
		s.heads.note(m)
	}
}

// forgetHead forgets a memory that a write deleted or found missing.
func (s *Store) forgetHead(memoryID string) {
	if s.keepHeads {
		s.heads.forget(memoryID)
	}
}

// guessedPath is the path this server last wrote the memory at.
func (s *Store) guessedPath(memoryID string) (string, bool) {
	if !s.keepHeads {
		return "", false
	}
	m, ok := s.heads.guess(memoryID)
	return m.Path, ok
}

// UpdateMemory implements storage.Memories.
func (s *Store) UpdateMemory(ctx context.Context, in storage.MemoryUpdate) (storage.MemoryRow, bool, error) {
	sha := in.ContentSHA256()
	var (
		m       storage.MemoryRow
		changed bool
	)
	// Without a new path the entry's path is the memory's current one,
	// known for sure only once the write reads it: the path it had when
	// this server last wrote it is the guess.
	var split *splitEntry
	if in.Content != nil {
		if in.Path != nil {
			split = s.splitAhead(*in.Path, *in.Content)
		} else if p, ok := s.guessedPath(in.MemoryID); ok {
			split = s.splitAhead(p, *in.Content)
		}
	}
	err := s.writeMemory(ctx, in.StoreID, split, func(tx storage.MemoryTx) (err error) {
		m, changed, err = storage.UpdateMemoryIn(ctx, tx, in, sha)
		return err
	})
	s.noteHead(m, err)
	if errors.Is(err, storage.ErrNotFound) {
		s.forgetHead(in.MemoryID)
	}
	return m, changed, err
}

// DeleteMemory implements storage.Memories.
func (s *Store) DeleteMemory(ctx context.Context, storeID, memoryID, expectedSHA256 string, by storage.Actor) error {
	err := s.writeMemory(ctx, storeID, nil, func(tx storage.MemoryTx) error {
		return storage.DeleteMemoryIn(ctx, tx, storeID, memoryID, expectedSHA256, by)
	})
	if err == nil || errors.Is(err, storage.ErrNotFound) {
		s.forgetHead(memoryID)
	}
	return err
}

// CountMemories implements storage.Memories.
func (s *Store) CountMemories(ctx context.Context, storeID string) (int, error) {
	var n int
	err := s.db().QueryRow(ctx, `SELECT memory_count FROM memory_stores WHERE id = ?`, storeID).Scan(&n)
	return n, err
}

// ListMemories implements storage.Memories: storage.MemoryListing's walk
// of the (store_id, path) index, inside one snapshot.
func (s *Store) ListMemories(ctx context.Context, q storage.MemoryQuery) (storage.Page[storage.MemoryEntry], error) {
	var page storage.Page[storage.MemoryEntry]
	listing, err := storage.PlanListing(q)
	if err != nil {
		return page, err
	}
	err = s.read(ctx, func(tx Conn) error {
		if _, err := s.getStore(ctx, tx, q.StoreID, false); err != nil {
			return err
		}
		page, err = listing.Page(memoryRange{ctx: ctx, tx: tx, q: q})
		return err
	})
	return page, err
}

// memoryRange is storage.MemoryRange in a read transaction.
type memoryRange struct {
	ctx context.Context
	tx  Conn
	q   storage.MemoryQuery
}

func (r memoryRange) Memories(from storage.ListBound, upper string, n int) ([]storage.MemoryRow, error) {
	scan := func(row Row) (storage.MemoryRow, error) { return scanMemory(row, r.q.WithContent) }
	out, err := queryAll(r.ctx, r.tx, scan, selectMemory(r.q.WithContent)+` WHERE m.store_id = ? AND m.path `+from.Op()+` ? AND m.path < ? ORDER BY m.path LIMIT ?`, r.q.StoreID, from.Key, upper, n)
	if err != nil {
		return nil, fmt.Errorf("list memories: %w", err)
	}
	return out, nil
}

func (r memoryRange) Any(from storage.ListBound, upper string) (bool, error) {
	return exists(r.ctx, r.tx, `SELECT 1 FROM memories WHERE store_id = ? AND path `+from.Op()+` ? AND path < ? LIMIT 1`, r.q.StoreID, from.Key, upper)
}

// ---- versions ----

const versionColumns = `id, store_id, memory_id, operation, sequence, path, content_sha256, content_size_bytes, created_at, created_by_type, created_by_id, redacted_at, redacted_by_type, redacted_by_id`

func scanVersion(row Row, withContent bool) (storage.VersionRow, error) {
	// One value holds every scan target, as in scanMemory: the change feed
	// scans up to a thousand rows a page.
	var r struct {
		v            storage.VersionRow
		path, sha    *string
		size         *int64
		content      []byte
		redacted     *time.Time
		rbType, rbID *string
		dest         [15]any
	}
	v := &r.v
	r.dest = [15]any{&v.ID, &v.StoreID, &v.MemoryID, &v.Operation, &v.Sequence, &r.path, &r.sha, &r.size, &v.CreatedAt, &v.CreatedBy.Kind, &v.CreatedBy.ID, &r.redacted, &r.rbType, &r.rbID, &r.content}
	dest := r.dest[:14]
	if withContent {
		dest = r.dest[:]
	}
	if err := row.Scan(dest...); err != nil {
		return *v, err
	}
	v.Path, v.ContentSHA256, v.ContentSizeBytes, v.Content = deref(r.path), deref(r.sha), deref(r.size), string(r.content)
	if r.redacted != nil {
		v.RedactedAt = *r.redacted
		v.RedactedBy = storage.Actor{Kind: storage.ActorKind(deref(r.rbType)), ID: deref(r.rbID)}
	}
	return *v, nil
}

func getVersion(ctx context.Context, q Conn, storeID, versionID string) (storage.VersionRow, error) {
	return scanVersion(q.QueryRow(ctx, `SELECT `+versionColumns+`, content FROM memory_versions WHERE id = ? AND store_id = ?`, versionID, storeID), true)
}

// GetMemoryVersion implements storage.MemoryVersions.
func (s *Store) GetMemoryVersion(ctx context.Context, storeID, versionID string) (storage.VersionRow, error) {
	return getVersion(ctx, s.db(), storeID, versionID)
}

// ListMemoryVersions implements storage.MemoryVersions. "Newest first" is
// change-feed sequence descending, the store's commit order, which every
// filter's index ends in. The cursor stays the last version id seen, and
// the page goes on from that version's sequence.
func (s *Store) ListMemoryVersions(ctx context.Context, q storage.MemoryVersionQuery) (storage.Page[storage.VersionRow], error) {
	var (
		page storage.Page[storage.VersionRow]
		a    args
	)
	where := []string{"store_id = " + a.add(q.StoreID)}
	if q.Cursor != "" {
		after, err := storage.DecodeCursor(storage.StoreCursor(storage.CursorMemoryVersions, q.StoreID), q.Cursor)
		if err != nil {
			return page, err
		}
		where = append(where, "sequence < (SELECT sequence FROM memory_versions WHERE id = "+a.add(after)+" AND store_id = "+a.add(q.StoreID)+")")
	}
	if q.MemoryID != "" {
		where = append(where, "memory_id = "+a.add(q.MemoryID))
	}
	if q.Operation != "" {
		where = append(where, "operation = "+a.add(q.Operation))
	}
	if q.CreatedBy != (storage.Actor{}) {
		where = append(where, "created_by_type = "+a.add(q.CreatedBy.Kind)+" AND created_by_id = "+a.add(q.CreatedBy.ID))
	}
	if q.CreatedGTE != nil {
		where = append(where, "created_at >= "+a.add(*q.CreatedGTE))
	}
	if q.CreatedLTE != nil {
		where = append(where, "created_at <= "+a.add(*q.CreatedLTE))
	}
	limit := storage.ListLimit(q.Limit)
	cols := versionColumns
	if q.WithContent {
		cols += ", content"
	}
	query := `SELECT ` + cols + ` FROM memory_versions WHERE ` + strings.Join(where, " AND ") + ` ORDER BY sequence DESC LIMIT ` + a.add(limit+1)
	err := s.read(ctx, func(tx Conn) error {
		if _, err := s.getStore(ctx, tx, q.StoreID, false); err != nil {
			return err
		}
		scan := func(r Row) (storage.VersionRow, error) { return scanVersion(r, q.WithContent) }
		var err error
		if page.Items, err = queryAll(ctx, tx, scan, query, a...); err != nil {
			return fmt.Errorf("list memory versions: %w", err)
		}
		return nil
	})
	if err != nil {
		return page, err
	}
	if len(page.Items) > limit {
		page.Items = page.Items[:limit]
		page.Next = storage.EncodeCursor(storage.StoreCursor(storage.CursorMemoryVersions, q.StoreID), page.Items[limit-1].ID)
	}
	return page, nil
}

// RedactMemoryVersion implements storage.MemoryVersions.
func (s *Store) RedactMemoryVersion(ctx context.Context, storeID, versionID string, by storage.Actor) (storage.VersionRow, error) {
	var v storage.VersionRow
	err := s.writeMemory(ctx, storeID, nil, func(tx storage.MemoryTx) (err error) {
		v, err = storage.RedactVersionIn(ctx, tx, storeID, versionID, by)
		return err
	})
	return v, err
}

// ---- the change feed ----

// latestSequence reads a store's change-feed counter.
func latestSequence(ctx context.Context, q Conn, storeID string) (int64, error) {
	var seq int64
	err := q.QueryRow(ctx, `SELECT last_sequence FROM memory_stores WHERE id = ?`, storeID).Scan(&seq)
	return seq, err
}

// ListChanges implements storage.MemoryVersions. The counter and the page
// are read in one snapshot, so Latest covers every change returned.
func (s *Store) ListChanges(ctx context.Context, storeID string, after int64, limit int) (storage.ChangePage, error) {
	var page storage.ChangePage
	err := s.read(ctx, func(tx Conn) error {
		latest, err := latestSequence(ctx, tx, storeID)
		if err != nil {
			return err
		}
		if err := checkRetained(ctx, tx, storeID, after); err != nil {
			return err
		}
		page, err = storage.PageChanges(latest, after, limit, func(n int) ([]storage.VersionRow, error) {
			scan := func(r Row) (storage.VersionRow, error) { return scanVersion(r, false) }
			changes, err := queryAll(ctx, tx, scan, `SELECT `+versionColumns+` FROM memory_versions WHERE store_id = ? AND sequence > ? ORDER BY sequence LIMIT ?`,
				storeID, after, n)
			if err != nil {
				return nil, fmt.Errorf("list changes of memory store %s: %w", storeID, err)
			}
			return changes, nil
		})
		return err
	})
	return page, err
}

// Snapshot implements storage.MemoryVersions. The read snapshot holds the
// counter and every memory as of its first query while writers go on.
func (s *Store) Snapshot(ctx context.Context, storeID, prefix string, at func(int64) error, each func(storage.MemoryRow) error) error {
	return s.read(ctx, func(tx Conn) error {
		seq, err := latestSequence(ctx, tx, storeID)
		if err != nil {
			return err
		}
		if err := at(seq); err != nil {
			return err
		}
		_, upper := storage.SubtreeRange(prefix)
		rows, err := tx.Query(ctx, memoryWithContent+` WHERE m.store_id = ? AND m.path >= ? AND m.path < ? ORDER BY m.path`, storeID, prefix, upper)
		if err != nil {
			return fmt.Errorf("snapshot of memory store %s: %w", storeID, err)
		}
		defer rows.Close()
		for rows.Next() {
			m, err := scanMemory(rows, true)
			if err != nil {
				return err
			}
			if err := each(m); err != nil {
				return err
			}
		}
		return rows.Err()
	})
}

// WriteMemoriesTogether runs fn's memory writes to one store
// (storage.CreateMemoryIn, UpdateMemoryIn, … on the MemoryTx it is given)
// as one write, in one transaction, under the same rules and into the same
// rows as CreateMemory and UpdateMemory: through the backend's group commit
// where it has one, so the store's counters are kept in memory and written
// once. It exists for bulk loads (`memstore bench --seed --direct`): a
// commit per write makes a million-memory data set take hours, while a
// server answering requests keeps one write per request. fn may run more
// than once, as any write's.
func (s *Store) WriteMemoriesTogether(ctx context.Context, storeID string, fn func(storage.MemoryTx) error) error {
	return s.writeMemory(ctx, storeID, nil, fn)
}
