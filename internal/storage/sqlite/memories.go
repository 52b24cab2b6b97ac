package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/webhooks"
)

// readTx runs fn in a read-only transaction: one consistent snapshot for a
// listing that takes several queries, without taking the write lock (WAL
// readers never block the writer).
func (s *DB) readTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(tx)
}

// ---- stores ----

const storeColumns = `id, name, description, metadata, created_at, updated_at, archived_at`

func scanStore(row rowScanner) (storage.MemoryStoreRow, error) {
	var (
		st               storage.MemoryStoreRow
		meta             string
		created, updated string
		archived         sql.NullString
	)
	if err := row.Scan(&st.ID, &st.Name, &st.Description, &meta, &created, &updated, &archived); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return st, storage.ErrNotFound
		}
		return st, err
	}
	if err := json.Unmarshal([]byte(meta), &st.Metadata); err != nil {
		return st, fmt.Errorf("memory store %s: metadata: %w", st.ID, err)
	}
	if st.Metadata == nil {
		st.Metadata = map[string]string{}
	}
	var err error
	if st.CreatedAt, err = parseTime(created); err != nil {
		return st, err
	}
	if st.UpdatedAt, err = parseTime(updated); err != nil {
		return st, err
	}
	st.ArchivedAt, err = optionalTime(archived)
	return st, err
}

// optionalTime reads a nullable time column as a row keeps it: zero when
// NULL.
func optionalTime(ns sql.NullString) (time.Time, error) {
	if !ns.Valid {
		return time.Time{}, nil
	}
	return parseTime(ns.String)
}

func getStore(ctx context.Context, q queryer, id string) (storage.MemoryStoreRow, error) {
	return scanStore(q.QueryRowContext(ctx, `SELECT `+storeColumns+` FROM memory_stores WHERE id = ?`, id))
}

func encodeMetadata(m map[string]string) (string, error) {
	if m == nil {
		m = map[string]string{}
	}
	b, err := json.Marshal(m)
	return string(b), err
}

// CreateMemoryStore implements storage.MemoryStores.
func (s *DB) CreateMemoryStore(ctx context.Context, in storage.NewMemoryStore) (storage.MemoryStoreRow, error) {
	meta, err := encodeMetadata(in.Metadata)
	if err != nil {
		return storage.MemoryStoreRow{}, err
	}
	var st storage.MemoryStoreRow
	err = s.tx(ctx, func(sqlTx *sql.Tx) error {
		tx := s.cached(sqlTx)
		now := s.now()
		id := ids.NewAt(ids.MemoryStore, now)
		if _, err := tx.ExecContext(ctx, `INSERT INTO memory_stores (id, name, description, metadata, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
			id, in.Name, in.Description, meta, formatTime(now), formatTime(now)); err != nil {
			return fmt.Errorf("create memory store: %w", err)
		}
		if err := s.emit(ctx, sqlTx, webhooks.Of(webhooks.MemoryStoreCreated, id)); err != nil {
			return err
		}
		st, err = getStore(ctx, tx, id)
		return err
	})
	return st, err
}

// GetMemoryStore implements storage.MemoryStores.
func (s *DB) GetMemoryStore(ctx context.Context, id string) (storage.MemoryStoreRow, error) {
	return getStore(ctx, s.cached(nil), id)
}

// ListMemoryStores implements storage.MemoryStores. Ids sort by creation
// time, so id order is newest first and the last id seen is the cursor.
func (s *DB) ListMemoryStores(ctx context.Context, q storage.MemoryStoreQuery) (storage.Page[storage.MemoryStoreRow], error) {
	var page storage.Page[storage.MemoryStoreRow]
	where := []string{"1 = 1"}
	var args []any
	if q.Cursor != "" {
		after, err := storage.DecodeCursor(storage.CursorMemoryStores, q.Cursor)
		if err != nil {
			return page, err
		}
		where, args = append(where, "id < ?"), append(args, after)
	}
	if !q.IncludeArchived {
		where = append(where, "archived_at IS NULL")
	}
	if q.CreatedGTE != nil {
		where, args = append(where, "created_at >= ?"), append(args, formatTime(*q.CreatedGTE))
	}
	if q.CreatedLTE != nil {
		where, args = append(where, "created_at <= ?"), append(args, formatTime(*q.CreatedLTE))
	}
	limit := storage.ListLimit(q.Limit)
	args = append(args, limit+1)
	var err error
	page.Items, err = queryAll(ctx, s.cached(nil), scanStore, `SELECT `+storeColumns+` FROM memory_stores WHERE `+strings.Join(where, " AND ")+` ORDER BY id DESC LIMIT ?`, args...)
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
func (s *DB) UpdateMemoryStore(ctx context.Context, id string, p storage.MemoryStorePatch) (storage.MemoryStoreRow, error) {
	var st storage.MemoryStoreRow
	err := s.tx(ctx, func(sqlTx *sql.Tx) error {
		tx := s.cached(sqlTx)
		cur, err := getStore(ctx, tx, id)
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
		meta, err := encodeMetadata(next.Metadata)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE memory_stores SET name = ?, description = ?, metadata = ?, updated_at = ? WHERE id = ?`,
			next.Name, next.Description, meta, formatTime(s.now()), id); err != nil {
			return fmt.Errorf("update memory store %s: %w", id, err)
		}
		st, err = getStore(ctx, tx, id)
		return err
	})
	return st, err
}

// ArchiveMemoryStore implements storage.MemoryStores.
func (s *DB) ArchiveMemoryStore(ctx context.Context, id string) (storage.MemoryStoreRow, error) {
	var st storage.MemoryStoreRow
	err := s.tx(ctx, func(sqlTx *sql.Tx) error {
		tx := s.cached(sqlTx)
		now := formatTime(s.now())
		res, err := tx.ExecContext(ctx, `UPDATE memory_stores SET archived_at = ?, updated_at = ? WHERE id = ? AND archived_at IS NULL`, now, now, id)
		if err != nil {
			return fmt.Errorf("archive memory store %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			if err := s.emit(ctx, sqlTx, webhooks.Of(webhooks.MemoryStoreArchived, id)); err != nil {
				return err
			}
		}
		st, err = getStore(ctx, tx, id)
		return err
	})
	return st, err
}

// DeleteMemoryStore implements storage.MemoryStores. The foreign keys
// cascade to the store's memories and versions inside the same
// transaction. A claimed work item that is not stopped is a worker that
// may still sync the store; an unclaimed one of a terminated session will
// only be stopped by the worker that claims it.
func (s *DB) DeleteMemoryStore(ctx context.Context, id string) error {
	return s.tx(ctx, func(sqlTx *sql.Tx) error {
		tx := s.cached(sqlTx)
		var inUse storage.StoreInUseError
		err := tx.QueryRowContext(ctx, `SELECT s.id, s.status FROM session_resources r JOIN sessions s ON s.id = r.session_id
			WHERE r.memory_store_id = ? AND (s.status != 'terminated' OR EXISTS (
				SELECT 1 FROM work_items w WHERE w.session_id = s.id AND w.state != 'stopped' AND w.claimed_at IS NOT NULL))
			ORDER BY s.id LIMIT 1`, id).Scan(&inUse.SessionID, &inUse.Status)
		switch {
		case err == nil:
			return &inUse
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM memory_stores WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("delete memory store %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return storage.ErrNotFound
		}
		return s.emit(ctx, sqlTx, webhooks.Of(webhooks.MemoryStoreDeleted, id))
	})
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

func scanMemory(row rowScanner, withContent bool) (storage.MemoryRow, error) {
	// One value holds every scan target: the addresses handed to Scan
	// make it escape, and a listing scans thousands of rows.
	var r struct {
		m                storage.MemoryRow
		created, updated string
		content          sql.NullString
	}
	m := &r.m
	dest := []any{&m.ID, &m.StoreID, &m.Path, &m.ContentSHA256, &m.ContentSizeBytes, &m.VersionID, &r.created, &r.updated}
	if withContent {
		dest = append(dest, &r.content)
	}
	if err := row.Scan(dest...); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return *m, storage.ErrNotFound
		}
		return *m, err
	}
	if withContent {
		c := r.content.String
		m.Content = &c
	}
	var err error
	if m.CreatedAt, err = parseTime(r.created); err != nil {
		return *m, err
	}
	m.UpdatedAt, err = parseTime(r.updated)
	return *m, err
}

func getMemory(ctx context.Context, q queryer, storeID, memoryID string, withContent bool) (storage.MemoryRow, error) {
	return scanMemory(q.QueryRowContext(ctx, selectMemory(withContent)+` WHERE m.id = ? AND m.store_id = ?`, memoryID, storeID), withContent)
}

// memoryTx is storage.MemoryTx on a group-commit batch: the committer
// runs writes one after another, so the store's counters are read once
// per batch and "locking" a store is reading them.
type memoryTx struct {
	s  *DB
	tx *batchTx
}

func (t memoryTx) LockStore(ctx context.Context, storeID string) (storage.StoreState, error) {
	r, err := t.tx.stores.load(ctx, t.tx, storeID)
	return storage.StoreState{Archived: r.archived, Memories: r.count}, err
}

// PathConflict implements storage.MemoryTx in one query, since the
// committer runs writes one after another: the path itself and each
// ancestor ("/a", "/a/b" for "/a/b/c") are point lookups on the
// (store_id, path) index, the first descendant a range seek on it.
func (t memoryTx) PathConflict(ctx context.Context, storeID, p, self string) error {
	marks, paths := inList(append([]string{p}, storage.Ancestors(p)...))
	args := append([]any{p, storeID, self}, paths...)
	lo, hi := storage.SubtreeRange(p + "/")
	args = append(args, storeID, self, lo, hi)
	var id, at string
	err := t.tx.QueryRowContext(ctx, `SELECT id, path FROM (
		SELECT id, path, CASE path WHEN ? THEN 0 ELSE 1 END AS rank FROM memories WHERE store_id = ? AND id <> ? AND path IN `+marks+`
		UNION ALL
		SELECT id, path, 2 FROM (SELECT id, path FROM memories WHERE store_id = ? AND id <> ? AND path >= ? AND path < ? ORDER BY path LIMIT 1)
	) ORDER BY rank, path LIMIT 1`, args...).Scan(&id, &at)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	return &storage.PathConflictError{Path: at, MemoryID: id}
}

func (t memoryTx) ReadMemory(ctx context.Context, storeID, memoryID string, withContent bool) (storage.MemoryRow, error) {
	return getMemory(ctx, t.tx, storeID, memoryID, withContent)
}

func (t memoryTx) Now(context.Context) (time.Time, error) { return t.s.now(), nil }

// AddVersion implements storage.MemoryTx: the sequence and the count move
// in the batch's counters (storeCounters), written once before COMMIT.
func (t memoryTx) AddVersion(ctx context.Context, v storage.VersionRow, delta int) error {
	st, err := t.tx.stores.take(ctx, t.tx, v.StoreID, delta)
	if err != nil {
		return err
	}
	var content, sha, size any
	if v.HasContent() {
		content, sha, size = []byte(v.Content), v.ContentSHA256, v.ContentSizeBytes
	}
	_, err = t.tx.ExecContext(ctx, `INSERT INTO memory_versions (id, store_id, memory_id, operation, path, content, content_sha256, content_size_bytes, created_at, created_by_type, created_by_id, sequence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v.ID, v.StoreID, v.MemoryID, v.Operation, v.Path, content, sha, size, formatTime(v.CreatedAt), v.CreatedBy.Kind, v.CreatedBy.ID, st.seq)
	if err != nil {
		return fmt.Errorf("write memory version: %w", err)
	}
	return nil
}

func (t memoryTx) InsertMemory(ctx context.Context, m storage.MemoryRow) error {
	if _, err := t.tx.ExecContext(ctx, `INSERT INTO memories (id, store_id, path, content_sha256, content_size_bytes, version_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		m.ID, m.StoreID, m.Path, m.ContentSHA256, m.ContentSizeBytes, m.VersionID, formatTime(m.CreatedAt), formatTime(m.UpdatedAt)); err != nil {
		return fmt.Errorf("create memory: %w", err)
	}
	return nil
}

// UpdateMemory implements storage.MemoryTx. Setting path, even to the same
// value, rewrites the memory's entry in the path index; most updates
// change content only.
func (t memoryTx) UpdateMemory(ctx context.Context, m storage.MemoryRow, moved bool) error {
	update := `UPDATE memories SET content_sha256 = ?, content_size_bytes = ?, version_id = ?, updated_at = ? WHERE id = ?`
	args := []any{m.ContentSHA256, m.ContentSizeBytes, m.VersionID, formatTime(m.UpdatedAt), m.ID}
	if moved {
		update = `UPDATE memories SET path = ?, content_sha256 = ?, content_size_bytes = ?, version_id = ?, updated_at = ? WHERE id = ?`
		args = append([]any{m.Path}, args...)
	}
	if _, err := t.tx.ExecContext(ctx, update, args...); err != nil {
		return fmt.Errorf("update memory %s: %w", m.ID, err)
	}
	return nil
}

func (t memoryTx) DeleteMemory(ctx context.Context, memoryID string) error {
	if _, err := t.tx.ExecContext(ctx, `DELETE FROM memories WHERE id = ?`, memoryID); err != nil {
		return fmt.Errorf("delete memory %s: %w", memoryID, err)
	}
	return nil
}

func (t memoryTx) ReadVersion(ctx context.Context, storeID, versionID string) (storage.VersionRow, error) {
	return getVersion(ctx, t.tx, storeID, versionID)
}

func (t memoryTx) IsHead(ctx context.Context, memoryID, versionID string) (bool, error) {
	var head int
	err := t.tx.QueryRowContext(ctx, `SELECT count(*) FROM memories WHERE id = ? AND version_id = ?`, memoryID, versionID).Scan(&head)
	return head > 0, err
}

func (t memoryTx) Redact(ctx context.Context, versionID string, at time.Time, by storage.Actor) error {
	if _, err := t.tx.ExecContext(ctx, `UPDATE memory_versions SET path = NULL, content = NULL, content_sha256 = NULL, content_size_bytes = NULL, redacted_at = ?, redacted_by_type = ?, redacted_by_id = ? WHERE id = ?`,
		formatTime(at), by.Kind, by.ID, versionID); err != nil {
		return fmt.Errorf("redact memory version %s: %w", versionID, err)
	}
	return nil
}

// CreateMemory implements storage.Memories. The content is hashed here, in
// the caller's goroutine: the committer runs writes one after another.
func (s *DB) CreateMemory(ctx context.Context, in storage.NewMemory) (storage.MemoryRow, error) {
	sha := in.ContentSHA256()
	var m storage.MemoryRow
	err := s.batch(ctx, func(ctx context.Context, tx *batchTx) (err error) {
		m, err = storage.CreateMemoryIn(ctx, memoryTx{s, tx}, in, sha)
		return err
	})
	return m, err
}

// GetMemory implements storage.Memories.
func (s *DB) GetMemory(ctx context.Context, storeID, memoryID string) (storage.MemoryRow, error) {
	return getMemory(ctx, s.cached(nil), storeID, memoryID, true)
}

// UpdateMemory implements storage.Memories.
func (s *DB) UpdateMemory(ctx context.Context, in storage.MemoryUpdate) (storage.MemoryRow, bool, error) {
	sha := in.ContentSHA256()
	var (
		m       storage.MemoryRow
		changed bool
	)
	err := s.batch(ctx, func(ctx context.Context, tx *batchTx) (err error) {
		m, changed, err = storage.UpdateMemoryIn(ctx, memoryTx{s, tx}, in, sha)
		return err
	})
	return m, changed, err
}

// DeleteMemory implements storage.Memories.
func (s *DB) DeleteMemory(ctx context.Context, storeID, memoryID, expectedSHA256 string, by storage.Actor) error {
	return s.batch(ctx, func(ctx context.Context, tx *batchTx) error {
		return storage.DeleteMemoryIn(ctx, memoryTx{s, tx}, storeID, memoryID, expectedSHA256, by)
	})
}

// CountMemories implements storage.MemoryStores.
func (s *DB) CountMemories(ctx context.Context, storeID string) (int, error) {
	var n int
	err := s.cached(nil).QueryRowContext(ctx, `SELECT memory_count FROM memory_stores WHERE id = ?`, storeID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, storage.ErrNotFound
	}
	return n, err
}

// MemoryStoreUsage implements storage.MemoryStores. It walks the prefix's
// key range of the path index: at most the store's limit of rows.
func (s *DB) MemoryStoreUsage(ctx context.Context, storeID, prefix string) (storage.StoreUsage, error) {
	var (
		u    storage.StoreUsage
		last sql.NullString
	)
	upper := prefix[:len(prefix)-1] + "0"
	err := s.cached(nil).QueryRowContext(ctx, `SELECT count(m.id), coalesce(sum(m.content_size_bytes), 0), max(m.updated_at)
		FROM memory_stores st LEFT JOIN memories m ON m.store_id = st.id AND m.path >= ? AND m.path < ?
		WHERE st.id = ? GROUP BY st.id`, prefix, upper, storeID).Scan(&u.Memories, &u.Bytes, &last)
	if errors.Is(err, sql.ErrNoRows) {
		return u, storage.ErrNotFound
	}
	if err != nil {
		return u, err
	}
	u.LastChange, err = nullTime(last)
	return u, err
}

// ListMemories implements storage.Memories: storage.MemoryListing's walk
// of the (store_id, path) index, inside one read snapshot.
func (s *DB) ListMemories(ctx context.Context, q storage.MemoryQuery) (storage.Page[storage.MemoryEntry], error) {
	var page storage.Page[storage.MemoryEntry]
	listing, err := storage.PlanListing(q)
	if err != nil {
		return page, err
	}
	err = s.readTx(ctx, func(sqlTx *sql.Tx) error {
		tx := s.cached(sqlTx)
		if _, err := getStore(ctx, tx, q.StoreID); err != nil {
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
	tx  queryer
	q   storage.MemoryQuery
}

func (r memoryRange) Memories(from storage.ListBound, upper string, n int) ([]storage.MemoryRow, error) {
	scan := func(row rowScanner) (storage.MemoryRow, error) { return scanMemory(row, r.q.WithContent) }
	out, err := queryAll(r.ctx, r.tx, scan, selectMemory(r.q.WithContent)+` WHERE m.store_id = ? AND m.path `+from.Op()+` ? AND m.path < ? ORDER BY m.path LIMIT ?`, r.q.StoreID, from.Key, upper, n)
	if err != nil {
		return nil, fmt.Errorf("list memories: %w", err)
	}
	return out, nil
}

func (r memoryRange) Any(from storage.ListBound, upper string) (bool, error) {
	var one int
	err := r.tx.QueryRowContext(r.ctx, `SELECT 1 FROM memories WHERE store_id = ? AND path `+from.Op()+` ? AND path < ? LIMIT 1`, r.q.StoreID, from.Key, upper).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// ---- versions ----

const versionColumns = `id, store_id, memory_id, operation, sequence, path, content_sha256, content_size_bytes, created_at, created_by_type, created_by_id, redacted_at, redacted_by_type, redacted_by_id`

func scanVersion(row rowScanner, withContent bool) (storage.VersionRow, error) {
	// One value holds every scan target, as in scanMemory: the change feed
	// scans up to a thousand rows a page.
	var r struct {
		v                      storage.VersionRow
		path, sha, content     sql.NullString
		size                   sql.NullInt64
		created                string
		redacted, rbType, rbID sql.NullString
	}
	v := &r.v
	dest := []any{&v.ID, &v.StoreID, &v.MemoryID, &v.Operation, &v.Sequence, &r.path, &r.sha, &r.size, &r.created, &v.CreatedBy.Kind, &v.CreatedBy.ID, &r.redacted, &r.rbType, &r.rbID}
	if withContent {
		dest = append(dest, &r.content)
	}
	if err := row.Scan(dest...); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return *v, storage.ErrNotFound
		}
		return *v, err
	}
	v.Path, v.ContentSHA256, v.ContentSizeBytes, v.Content = r.path.String, r.sha.String, r.size.Int64, r.content.String
	v.RedactedBy = storage.Actor{Kind: storage.ActorKind(r.rbType.String), ID: r.rbID.String}
	var err error
	if v.CreatedAt, err = parseTime(r.created); err != nil {
		return *v, err
	}
	v.RedactedAt, err = optionalTime(r.redacted)
	return *v, err
}

func getVersion(ctx context.Context, q queryer, storeID, versionID string) (storage.VersionRow, error) {
	return scanVersion(q.QueryRowContext(ctx, `SELECT `+versionColumns+`, content FROM memory_versions WHERE id = ? AND store_id = ?`, versionID, storeID), true)
}

// GetMemoryVersion implements storage.MemoryStores.
func (s *DB) GetMemoryVersion(ctx context.Context, storeID, versionID string) (storage.VersionRow, error) {
	return getVersion(ctx, s.cached(nil), storeID, versionID)
}

// ListMemoryVersions implements storage.MemoryStores. "Newest first" is
// change-feed sequence descending, the store's commit order, which every
// filter's index ends in (migration 0009). The cursor stays the last
// version id seen, and the page goes on from that version's sequence.
func (s *DB) ListMemoryVersions(ctx context.Context, q storage.MemoryVersionQuery) (storage.Page[storage.VersionRow], error) {
	var page storage.Page[storage.VersionRow]
	where := []string{"store_id = ?"}
	args := []any{q.StoreID}
	if q.Cursor != "" {
		after, err := storage.DecodeCursor(storage.StoreCursor(storage.CursorMemoryVersions, q.StoreID), q.Cursor)
		if err != nil {
			return page, err
		}
		where, args = append(where, "sequence < (SELECT sequence FROM memory_versions WHERE id = ? AND store_id = ?)"), append(args, after, q.StoreID)
	}
	if q.MemoryID != "" {
		where, args = append(where, "memory_id = ?"), append(args, q.MemoryID)
	}
	if q.Operation != "" {
		where, args = append(where, "operation = ?"), append(args, q.Operation)
	}
	if q.CreatedBy != (storage.Actor{}) {
		where, args = append(where, "created_by_type = ? AND created_by_id = ?"), append(args, q.CreatedBy.Kind, q.CreatedBy.ID)
	}
	if q.CreatedGTE != nil {
		where, args = append(where, "created_at >= ?"), append(args, formatTime(*q.CreatedGTE))
	}
	if q.CreatedLTE != nil {
		where, args = append(where, "created_at <= ?"), append(args, formatTime(*q.CreatedLTE))
	}
	limit := storage.ListLimit(q.Limit)
	args = append(args, limit+1)
	cols := versionColumns
	if q.WithContent {
		cols += ", content"
	}
	err := s.readTx(ctx, func(sqlTx *sql.Tx) error {
		tx := s.cached(sqlTx)
		if _, err := getStore(ctx, tx, q.StoreID); err != nil {
			return err
		}
		scan := func(r rowScanner) (storage.VersionRow, error) { return scanVersion(r, q.WithContent) }
		var err error
		if page.Items, err = queryAll(ctx, tx, scan, `SELECT `+cols+` FROM memory_versions WHERE `+strings.Join(where, " AND ")+` ORDER BY sequence DESC LIMIT ?`, args...); err != nil {
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
func (s *DB) RedactMemoryVersion(ctx context.Context, storeID, versionID string, by storage.Actor) (storage.VersionRow, error) {
	var v storage.VersionRow
	err := s.batch(ctx, func(ctx context.Context, tx *batchTx) (err error) {
		v, err = storage.RedactVersionIn(ctx, memoryTx{s, tx}, storeID, versionID, by)
		return err
	})
	return v, err
}
