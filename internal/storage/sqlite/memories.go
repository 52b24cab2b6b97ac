package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/memstore/memstore/api"
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

func scanStore(row rowScanner) (api.MemoryStore, error) {
	var (
		st               api.MemoryStore
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
	st.Type = "memory_store"
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
	st.ArchivedAt, err = nullTime(archived)
	return st, err
}

func getStore(ctx context.Context, q queryer, id string) (api.MemoryStore, error) {
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
func (s *DB) CreateMemoryStore(ctx context.Context, in storage.NewMemoryStore) (api.MemoryStore, error) {
	meta, err := encodeMetadata(in.Metadata)
	if err != nil {
		return api.MemoryStore{}, err
	}
	var st api.MemoryStore
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
func (s *DB) GetMemoryStore(ctx context.Context, id string) (api.MemoryStore, error) {
	return getStore(ctx, s.cached(nil), id)
}

// ListMemoryStores implements storage.MemoryStores. Ids sort by creation
// time, so id order is newest first and the last id seen is the cursor.
func (s *DB) ListMemoryStores(ctx context.Context, q storage.MemoryStoreQuery) (storage.Page[api.MemoryStore], error) {
	var page storage.Page[api.MemoryStore]
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
func (s *DB) UpdateMemoryStore(ctx context.Context, id string, p storage.MemoryStorePatch) (api.MemoryStore, error) {
	var st api.MemoryStore
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
func (s *DB) ArchiveMemoryStore(ctx context.Context, id string) (api.MemoryStore, error) {
	var st api.MemoryStore
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

// memoryRow is a memories row; content is loaded only when asked for.
type memoryRow struct {
	id, storeID, path, sha, versionID string
	size                              int64
	created, updated                  string
	content                           sql.NullString
}

func (r memoryRow) toAPI() (api.Memory, error) {
	m := api.Memory{
		ID:               r.id,
		Type:             "memory",
		MemoryStoreID:    r.storeID,
		Path:             r.path,
		ContentSHA256:    r.sha,
		ContentSizeBytes: r.size,
		MemoryVersionID:  r.versionID,
	}
	if r.content.Valid {
		c := r.content.String
		m.Content = &c
	}
	var err error
	if m.CreatedAt, err = parseTime(r.created); err != nil {
		return m, err
	}
	m.UpdatedAt, err = parseTime(r.updated)
	return m, err
}

const memoryColumns = `m.id, m.store_id, m.path, m.content_sha256, m.content_size_bytes, m.version_id, m.created_at, m.updated_at`

// memoryWithContent selects a memory and its head version's content.
const memoryWithContent = `SELECT ` + memoryColumns + `, v.content FROM memories m JOIN memory_versions v ON v.id = m.version_id`

func scanMemory(row rowScanner, withContent bool) (memoryRow, error) {
	var r memoryRow
	dest := []any{&r.id, &r.storeID, &r.path, &r.sha, &r.size, &r.versionID, &r.created, &r.updated}
	if withContent {
		dest = append(dest, &r.content)
	}
	err := row.Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return r, storage.ErrNotFound
	}
	return r, err
}

func getMemory(ctx context.Context, q queryer, storeID, memoryID string) (api.Memory, error) {
	r, err := scanMemory(q.QueryRowContext(ctx, memoryWithContent+` WHERE m.id = ? AND m.store_id = ?`, memoryID, storeID), true)
	if err != nil {
		return api.Memory{}, err
	}
	return r.toAPI()
}

// pathConflict returns the memory, other than self, that occupies p, is a
// file where p needs a directory (an ancestor of p), or is a file inside p
// (a descendant): the three ways two paths cannot coexist in one store.
func pathConflict(ctx context.Context, tx queryer, storeID, p, self string) error {
	// One query, since the committer runs writes one after another: the
	// path itself and each ancestor ("/a", "/a/b" for "/a/b/c") are point
	// lookups on the (store_id, path) index, the first descendant a range
	// seek on it. The path itself is reported first, then the shallowest
	// ancestor, then a descendant.
	marks, paths := inList(append([]string{p}, storage.Ancestors(p)...))
	args := append([]any{p, storeID, self}, paths...)
	lo, hi := storage.SubtreeRange(p + "/")
	args = append(args, storeID, self, lo, hi)
	var id, at string
	err := tx.QueryRowContext(ctx, `SELECT id, path FROM (
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

type versionRow struct {
	id, storeID, memoryID, op string
	path                      *string
	content                   *string
	sha                       *string
	size                      *int64
	by                        api.Actor
	at                        time.Time
	seq                       int64
}

// insertVersion writes a version under the change-feed sequence its write
// took (storeCounters.take).
func insertVersion(ctx context.Context, tx queryer, v versionRow) error {
	var content any
	if v.content != nil {
		content = []byte(*v.content)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO memory_versions (id, store_id, memory_id, operation, path, content, content_sha256, content_size_bytes, created_at, created_by_type, created_by_id, sequence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v.id, v.storeID, v.memoryID, v.op, v.path, content, v.sha, v.size, formatTime(v.at), v.by.Type, storage.ActorID(v.by), v.seq)
	if err != nil {
		return fmt.Errorf("write memory version: %w", err)
	}
	return nil
}

// CreateMemory implements storage.MemoryStores.
func (s *DB) CreateMemory(ctx context.Context, in storage.NewMemory) (api.Memory, error) {
	if err := storage.CheckActor(in.By); err != nil {
		return api.Memory{}, err
	}
	limit := in.MaxMemories
	if limit <= 0 {
		limit = api.DefaultMaxMemories
	}
	// Hashed here, in the caller's goroutine: the committer runs writes
	// one after another.
	sha, size := storage.ContentHash(in.Content), int64(len(in.Content))
	var m api.Memory
	err := s.batch(ctx, func(ctx context.Context, tx *batchTx) error {
		now := s.now()
		memID, verID := ids.NewAt(ids.Memory, now), ids.NewAt(ids.MemoryVersion, now)
		st, err := tx.stores.take(ctx, tx, in.StoreID, +1)
		if err != nil {
			return err
		}
		if st.archived {
			return storage.ErrStoreArchived
		}
		// The conflict comes first: a client retrying a create whose
		// response it lost learns the memory's id even when the store has
		// filled up since.
		if err := pathConflict(ctx, tx, in.StoreID, in.Path, ""); err != nil {
			return err
		}
		if st.count > limit {
			return &storage.StoreFullError{Limit: limit}
		}
		if err := insertVersion(ctx, tx, versionRow{id: verID, storeID: in.StoreID, memoryID: memID, op: api.OperationCreated,
			path: &in.Path, content: &in.Content, sha: &sha, size: &size, by: in.By, at: now, seq: st.seq}); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO memories (id, store_id, path, content_sha256, content_size_bytes, version_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			memID, in.StoreID, in.Path, sha, size, verID, formatTime(now), formatTime(now)); err != nil {
			return fmt.Errorf("create memory: %w", err)
		}
		content := in.Content
		m = api.Memory{ID: memID, Type: "memory", MemoryStoreID: in.StoreID, Path: in.Path, Content: &content,
			ContentSHA256: sha, ContentSizeBytes: size, MemoryVersionID: verID, CreatedAt: now, UpdatedAt: now}
		return nil
	})
	return m, err
}

// GetMemory implements storage.MemoryStores.
func (s *DB) GetMemory(ctx context.Context, storeID, memoryID string) (api.Memory, error) {
	return getMemory(ctx, s.cached(nil), storeID, memoryID)
}

// getMemoryFor reads the memory an update changes. Its stored content is
// read only when the update keeps it (a rename); otherwise the memory
// carries the update's content, which is what a no-op answers with.
func getMemoryFor(ctx context.Context, q queryer, in storage.MemoryUpdate) (api.Memory, error) {
	if in.Content == nil {
		return getMemory(ctx, q, in.StoreID, in.MemoryID)
	}
	r, err := scanMemory(q.QueryRowContext(ctx, `SELECT `+memoryColumns+` FROM memories m WHERE m.id = ? AND m.store_id = ?`, in.MemoryID, in.StoreID), false)
	if err != nil {
		return api.Memory{}, err
	}
	m, err := r.toAPI()
	m.Content = in.Content
	return m, err
}

// UpdateMemory implements storage.MemoryStores.
func (s *DB) UpdateMemory(ctx context.Context, in storage.MemoryUpdate) (api.Memory, bool, error) {
	if err := storage.CheckActor(in.By); err != nil {
		return api.Memory{}, false, err
	}
	var (
		m       api.Memory
		changed bool
	)
	sha := in.ContentSHA256()
	err := s.batch(ctx, func(ctx context.Context, tx *batchTx) error {
		if err := tx.stores.writable(ctx, tx, in.StoreID); err != nil {
			return err
		}
		cur, err := getMemoryFor(ctx, tx, in)
		if err != nil {
			return err
		}
		next, err := storage.PlanUpdate(cur, in, sha)
		if err != nil || next.Noop {
			m = cur
			return err
		}
		newPath, newContent, newSHA := next.Path, next.Content, next.SHA256
		if newPath != cur.Path {
			if err := pathConflict(ctx, tx, in.StoreID, newPath, cur.ID); err != nil {
				return err
			}
		}
		st, err := tx.stores.take(ctx, tx, in.StoreID, 0)
		if err != nil {
			return err
		}
		now := s.now()
		verID := ids.NewAt(ids.MemoryVersion, now)
		size := int64(len(newContent))
		if err := insertVersion(ctx, tx, versionRow{id: verID, storeID: in.StoreID, memoryID: cur.ID, op: api.OperationModified,
			path: &newPath, content: &newContent, sha: &newSHA, size: &size, by: in.By, at: now, seq: st.seq}); err != nil {
			return err
		}
		// Setting path, even to the same value, rewrites the memory's
		// entry in the path index; most updates change content only.
		update := `UPDATE memories SET content_sha256 = ?, content_size_bytes = ?, version_id = ?, updated_at = ? WHERE id = ?`
		args := []any{newSHA, size, verID, formatTime(now), cur.ID}
		if newPath != cur.Path {
			update = `UPDATE memories SET path = ?, content_sha256 = ?, content_size_bytes = ?, version_id = ?, updated_at = ? WHERE id = ?`
			args = append([]any{newPath}, args...)
		}
		if _, err := tx.ExecContext(ctx, update, args...); err != nil {
			return fmt.Errorf("update memory %s: %w", cur.ID, err)
		}
		changed = true
		m = cur
		m.Path, m.Content, m.ContentSHA256, m.ContentSizeBytes, m.MemoryVersionID, m.UpdatedAt = newPath, &newContent, newSHA, size, verID, now
		return nil
	})
	return m, changed, err
}

// DeleteMemory implements storage.MemoryStores.
func (s *DB) DeleteMemory(ctx context.Context, storeID, memoryID, expectedSHA256 string, by api.Actor) error {
	if err := storage.CheckActor(by); err != nil {
		return err
	}
	return s.batch(ctx, func(ctx context.Context, tx *batchTx) error {
		cur, err := scanMemory(tx.QueryRowContext(ctx, `SELECT `+memoryColumns+` FROM memories m WHERE m.id = ? AND m.store_id = ?`, memoryID, storeID), false)
		if err != nil {
			return err
		}
		if expectedSHA256 != "" && expectedSHA256 != cur.sha {
			return &storage.PreconditionFailedError{CurrentSHA256: cur.sha}
		}
		st, err := tx.stores.take(ctx, tx, storeID, -1)
		if err != nil {
			return err
		}
		now := s.now()
		if err := insertVersion(ctx, tx, versionRow{id: ids.NewAt(ids.MemoryVersion, now), storeID: storeID, memoryID: memoryID,
			op: api.OperationDeleted, path: &cur.path, by: by, at: now, seq: st.seq}); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM memories WHERE id = ?`, memoryID); err != nil {
			return fmt.Errorf("delete memory %s: %w", memoryID, err)
		}
		return nil
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

// ListMemories implements storage.MemoryStores.
//
// The page is built by walking the (store_id, path) index from a lower
// bound. A memory within the depth is an item; the first memory deeper
// than that stands for its whole directory, which is emitted as one prefix
// item, and the walk jumps past the directory's key range. The cursor is
// the next lower bound, so a page may end right after a prefix, or right
// before one, without the next page repeating or losing anything.
func (s *DB) ListMemories(ctx context.Context, q storage.MemoryQuery) (storage.Page[api.MemoryListItem], error) {
	var page storage.Page[api.MemoryListItem]
	prefix, from, upper, err := storage.ListStart(q)
	if err != nil {
		return page, err
	}
	limit := storage.ListLimit(q.Limit)
	err = s.readTx(ctx, func(sqlTx *sql.Tx) error {
		tx := s.cached(sqlTx)
		if _, err := getStore(ctx, tx, q.StoreID); err != nil {
			return err
		}
		for len(page.Items) < limit {
			want := limit - len(page.Items)
			batch, err := memoryBatch(ctx, tx, q, from, upper, want)
			if err != nil {
				return err
			}
			rolledUp := false
			for _, r := range batch {
				if dir, ok := storage.RollUp(r.path, prefix, q.Depth); ok {
					page.Items = append(page.Items, api.MemoryListItem{Prefix: &api.MemoryPrefix{Type: "memory_prefix", Path: dir}})
					_, past := storage.SubtreeRange(dir)
					from = storage.ListBound{Key: past}
					rolledUp = true
					break
				}
				m, err := r.toAPI()
				if err != nil {
					return err
				}
				page.Items = append(page.Items, api.MemoryListItem{Memory: &m})
				from = storage.ListBound{Key: r.path, Exclusive: true}
			}
			if !rolledUp && len(batch) < want {
				return nil // the range is exhausted
			}
		}
		// The page is full; it has a successor only if something is left.
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM memories WHERE store_id = ? AND path `+from.Op()+` ? AND path < ? LIMIT 1`, q.StoreID, from.Key, upper).Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil
		case err != nil:
			return err
		}
		page.Next = storage.EncodeCursor(storage.CursorMemories, from.Encode())
		return nil
	})
	return page, err
}

func memoryBatch(ctx context.Context, tx queryer, q storage.MemoryQuery, from storage.ListBound, upper string, n int) ([]memoryRow, error) {
	sel := `SELECT ` + memoryColumns + ` FROM memories m`
	if q.WithContent {
		sel = memoryWithContent
	}
	scan := func(r rowScanner) (memoryRow, error) { return scanMemory(r, q.WithContent) }
	out, err := queryAll(ctx, tx, scan, sel+` WHERE m.store_id = ? AND m.path `+from.Op()+` ? AND m.path < ? ORDER BY m.path LIMIT ?`, q.StoreID, from.Key, upper, n)
	if err != nil {
		return nil, fmt.Errorf("list memories: %w", err)
	}
	return out, nil
}

// ---- versions ----

const versionColumns = `id, store_id, memory_id, operation, path, content_sha256, content_size_bytes, created_at, created_by_type, created_by_id, redacted_at, redacted_by_type, redacted_by_id`

func scanVersion(row rowScanner, withContent bool) (api.MemoryVersion, error) {
	var (
		v                      api.MemoryVersion
		path, sha, content     sql.NullString
		size                   sql.NullInt64
		created, byType, byID  string
		redacted, rbType, rbID sql.NullString
	)
	dest := []any{&v.ID, &v.MemoryStoreID, &v.MemoryID, &v.Operation, &path, &sha, &size, &created, &byType, &byID, &redacted, &rbType, &rbID}
	if withContent {
		dest = append(dest, &content)
	}
	if err := row.Scan(dest...); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return v, storage.ErrNotFound
		}
		return v, err
	}
	v.Type = "memory_version"
	if path.Valid {
		v.Path = &path.String
	}
	if sha.Valid {
		v.ContentSHA256 = &sha.String
	}
	if size.Valid {
		v.ContentSizeBytes = &size.Int64
	}
	if content.Valid {
		v.Content = &content.String
	}
	v.CreatedBy = storage.ActorFrom(byType, byID)
	if rbType.Valid {
		a := storage.ActorFrom(rbType.String, rbID.String)
		v.RedactedBy = &a
	}
	var err error
	if v.CreatedAt, err = parseTime(created); err != nil {
		return v, err
	}
	v.RedactedAt, err = nullTime(redacted)
	return v, err
}

func getVersion(ctx context.Context, q queryer, storeID, versionID string) (api.MemoryVersion, error) {
	return scanVersion(q.QueryRowContext(ctx, `SELECT `+versionColumns+`, content FROM memory_versions WHERE id = ? AND store_id = ?`, versionID, storeID), true)
}

// GetMemoryVersion implements storage.MemoryStores.
func (s *DB) GetMemoryVersion(ctx context.Context, storeID, versionID string) (api.MemoryVersion, error) {
	return getVersion(ctx, s.cached(nil), storeID, versionID)
}

// ListMemoryVersions implements storage.MemoryStores. "Newest first" is
// change-feed sequence descending, the store's commit order, which every
// filter's index ends in (migration 0009). The cursor stays the last
// version id seen, and the page goes on from that version's sequence.
func (s *DB) ListMemoryVersions(ctx context.Context, q storage.MemoryVersionQuery) (storage.Page[api.MemoryVersion], error) {
	var page storage.Page[api.MemoryVersion]
	where := []string{"store_id = ?"}
	args := []any{q.StoreID}
	if q.Cursor != "" {
		after, err := storage.DecodeCursor(storage.CursorMemoryVersions, q.Cursor)
		if err != nil {
			return page, err
		}
		where, args = append(where, "sequence < (SELECT sequence FROM memory_versions WHERE id = ?)"), append(args, after)
	}
	if q.MemoryID != "" {
		where, args = append(where, "memory_id = ?"), append(args, q.MemoryID)
	}
	if q.Operation != "" {
		where, args = append(where, "operation = ?"), append(args, q.Operation)
	}
	if q.ActorType != "" {
		where, args = append(where, "created_by_type = ? AND created_by_id = ?"), append(args, q.ActorType, q.ActorID)
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
		scan := func(r rowScanner) (api.MemoryVersion, error) { return scanVersion(r, q.WithContent) }
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
		page.Next = storage.EncodeCursor(storage.CursorMemoryVersions, page.Items[limit-1].ID)
	}
	return page, nil
}

// RedactMemoryVersion implements storage.MemoryStores.
func (s *DB) RedactMemoryVersion(ctx context.Context, storeID, versionID string, by api.Actor) (api.MemoryVersion, error) {
	if err := storage.CheckActor(by); err != nil {
		return api.MemoryVersion{}, err
	}
	var v api.MemoryVersion
	err := s.tx(ctx, func(sqlTx *sql.Tx) error {
		tx := s.cached(sqlTx)
		cur, err := getVersion(ctx, tx, storeID, versionID)
		if err != nil {
			return err
		}
		if cur.RedactedAt != nil {
			v = cur
			return nil
		}
		var head int
		err = tx.QueryRowContext(ctx, `SELECT count(*) FROM memories WHERE id = ? AND version_id = ?`, cur.MemoryID, versionID).Scan(&head)
		if err != nil {
			return err
		}
		if head > 0 {
			return storage.ErrRedactHead
		}
		if _, err := tx.ExecContext(ctx, `UPDATE memory_versions SET path = NULL, content = NULL, content_sha256 = NULL, content_size_bytes = NULL, redacted_at = ?, redacted_by_type = ?, redacted_by_id = ? WHERE id = ?`,
			formatTime(s.now()), by.Type, storage.ActorID(by), versionID); err != nil {
			return fmt.Errorf("redact memory version %s: %w", versionID, err)
		}
		v, err = getVersion(ctx, tx, storeID, versionID)
		return err
	})
	return v, err
}
