package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/webhooks"
)

// ---- stores ----

const storeColumns = `id, name, description, metadata, created_at, updated_at, archived_at`

func scanStore(row pgx.Row) (storage.MemoryStoreRow, error) {
	var (
		st       storage.MemoryStoreRow
		meta     string
		archived *time.Time
	)
	if err := row.Scan(&st.ID, &st.Name, &st.Description, &meta, &st.CreatedAt, &st.UpdatedAt, &archived); err != nil {
		return st, notFound(err)
	}
	if archived != nil {
		st.ArchivedAt = *archived
	}
	if err := json.Unmarshal([]byte(meta), &st.Metadata); err != nil {
		return st, fmt.Errorf("memory store %s: metadata: %w", st.ID, err)
	}
	if st.Metadata == nil {
		st.Metadata = map[string]string{}
	}
	return st, nil
}

func getStore(ctx context.Context, q querier, id string, lock bool) (storage.MemoryStoreRow, error) {
	return scanStore(q.QueryRow(ctx, `SELECT `+storeColumns+` FROM memory_stores WHERE id = $1`+forUpdate(lock), id))
}

// CreateMemoryStore implements storage.MemoryStores.
func (s *DB) CreateMemoryStore(ctx context.Context, in storage.NewMemoryStore) (storage.MemoryStoreRow, error) {
	var st storage.MemoryStoreRow
	err := s.tx(ctx, func(tx pgx.Tx) error {
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		id := ids.NewAt(ids.MemoryStore, now)
		if _, err := tx.Exec(ctx, `INSERT INTO memory_stores (id, name, description, metadata, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5)`,
			id, in.Name, in.Description, metadataJSON(in.Metadata), now); err != nil {
			return fmt.Errorf("create memory store: %w", err)
		}
		if err := s.emit(ctx, tx, webhooks.Of(webhooks.MemoryStoreCreated, id)); err != nil {
			return err
		}
		st, err = getStore(ctx, tx, id, false)
		return err
	})
	return st, err
}

// GetMemoryStore implements storage.MemoryStores.
func (s *DB) GetMemoryStore(ctx context.Context, id string) (storage.MemoryStoreRow, error) {
	st, err := getStore(ctx, s.pool, id, false)
	return st, unavailable(err)
}

// ListMemoryStores implements storage.MemoryStores. Ids sort by creation
// time, so id order is newest first and the last id seen is the cursor.
func (s *DB) ListMemoryStores(ctx context.Context, q storage.MemoryStoreQuery) (storage.Page[storage.MemoryStoreRow], error) {
	var (
		page  storage.Page[storage.MemoryStoreRow]
		a     args
		where = []string{"true"}
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
	page.Items, err = queryAll(ctx, s.pool, scanStore, `SELECT `+storeColumns+` FROM memory_stores WHERE `+strings.Join(where, " AND ")+` ORDER BY id DESC LIMIT `+a.add(limit+1), a...)
	if err != nil {
		return page, unavailable(fmt.Errorf("list memory stores: %w", err))
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
	err := s.tx(ctx, func(tx pgx.Tx) error {
		cur, err := getStore(ctx, tx, id, true)
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
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE memory_stores SET name = $1, description = $2, metadata = $3, updated_at = $4 WHERE id = $5`,
			next.Name, next.Description, metadataJSON(next.Metadata), now, id); err != nil {
			return fmt.Errorf("update memory store %s: %w", id, err)
		}
		st, err = getStore(ctx, tx, id, false)
		return err
	})
	return st, err
}

// ArchiveMemoryStore implements storage.MemoryStores.
func (s *DB) ArchiveMemoryStore(ctx context.Context, id string) (storage.MemoryStoreRow, error) {
	var st storage.MemoryStoreRow
	err := s.tx(ctx, func(tx pgx.Tx) error {
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE memory_stores SET archived_at = $1, updated_at = $1 WHERE id = $2 AND archived_at IS NULL`, now, id)
		if err != nil {
			return fmt.Errorf("archive memory store %s: %w", id, err)
		}
		if tag.RowsAffected() == 1 {
			if err := s.emit(ctx, tx, webhooks.Of(webhooks.MemoryStoreArchived, id)); err != nil {
				return err
			}
		}
		st, err = getStore(ctx, tx, id, false)
		return err
	})
	return st, err
}

// DeleteMemoryStore implements storage.MemoryStores. The store's row lock
// waits for sessions being created with it attached (they hold it FOR
// SHARE), so the in-use check sees them.
func (s *DB) DeleteMemoryStore(ctx context.Context, id string) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := getStore(ctx, tx, id, true); err != nil {
			return err
		}
		var inUse storage.StoreInUseError
		err := tx.QueryRow(ctx, `SELECT s.id, s.status FROM session_resources r JOIN sessions s ON s.id = r.session_id
			WHERE r.memory_store_id = $1 AND (s.status != 'terminated' OR EXISTS (
				SELECT 1 FROM work_items w WHERE w.session_id = s.id AND w.state != 'stopped' AND w.claimed_at IS NOT NULL))
			ORDER BY s.id LIMIT 1`, id).Scan(&inUse.SessionID, &inUse.Status)
		switch {
		case err == nil:
			return &inUse
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM memory_stores WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete memory store %s: %w", id, err)
		}
		return s.emit(ctx, tx, webhooks.Of(webhooks.MemoryStoreDeleted, id))
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

func scanMemory(row pgx.Row, withContent bool) (storage.MemoryRow, error) {
	// One value holds every scan target: the addresses handed to Scan
	// make it escape, and a listing scans thousands of rows.
	var r struct {
		m       storage.MemoryRow
		content []byte
	}
	m := &r.m
	dest := []any{&m.ID, &m.StoreID, &m.Path, &m.ContentSHA256, &m.ContentSizeBytes, &m.VersionID, &m.CreatedAt, &m.UpdatedAt}
	if withContent {
		dest = append(dest, &r.content)
	}
	if err := row.Scan(dest...); err != nil {
		return *m, notFound(err)
	}
	if withContent {
		c := string(r.content)
		m.Content = &c
	}
	return *m, nil
}

func getMemory(ctx context.Context, q querier, storeID, memoryID string, withContent bool) (storage.MemoryRow, error) {
	return scanMemory(q.QueryRow(ctx, selectMemory(withContent)+` WHERE m.id = $1 AND m.store_id = $2`, memoryID, storeID), withContent)
}

// memoryTx is storage.MemoryTx in a PostgreSQL transaction.
type memoryTx struct {
	s  *DB
	tx pgx.Tx
}

// LockStore implements storage.MemoryTx with the store's row lock, which
// orders every write to the store, from every replica: the path checks,
// the precondition, the limit and the sequence then see every earlier
// write and none in flight.
func (t memoryTx) LockStore(ctx context.Context, storeID string) (storage.StoreState, error) {
	var (
		st       storage.StoreState
		archived *time.Time
	)
	err := t.tx.QueryRow(ctx, `SELECT memory_count, archived_at FROM memory_stores WHERE id = $1 FOR UPDATE`, storeID).Scan(&st.Memories, &archived)
	st.Archived = archived != nil
	return st, notFound(err)
}

// PathConflict implements storage.MemoryTx: the path and its ancestors
// are point lookups on the (store_id, path) index, the first descendant a
// range seek on it.
func (t memoryTx) PathConflict(ctx context.Context, storeID, p, self string) error {
	var id, at string
	check := func(query string, args ...any) (bool, error) {
		err := t.tx.QueryRow(ctx, query, args...).Scan(&id, &at)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	}
	found, err := check(`SELECT id, path FROM memories WHERE store_id = $1 AND id <> $2 AND path = ANY($3) ORDER BY path = $4 DESC, path LIMIT 1`,
		storeID, self, append(storage.Ancestors(p), p), p)
	if err == nil && !found {
		lo, hi := storage.SubtreeRange(p + "/")
		found, err = check(`SELECT id, path FROM memories WHERE store_id = $1 AND id <> $2 AND path >= $3 AND path < $4 ORDER BY path LIMIT 1`, storeID, self, lo, hi)
	}
	switch {
	case err != nil:
		return err
	case found:
		return &storage.PathConflictError{Path: at, MemoryID: id}
	}
	return nil
}

func (t memoryTx) ReadMemory(ctx context.Context, storeID, memoryID string, withContent bool) (storage.MemoryRow, error) {
	return getMemory(ctx, t.tx, storeID, memoryID, withContent)
}

func (t memoryTx) Now(ctx context.Context) (time.Time, error) { return t.s.now(ctx, t.tx) }

// AddVersion implements storage.MemoryTx: one update of the store's row
// (locked by LockStore) takes the next sequence (migration 0005) and
// moves the count.
func (t memoryTx) AddVersion(ctx context.Context, v storage.VersionRow, delta int) error {
	var seq int64
	if err := t.tx.QueryRow(ctx, `UPDATE memory_stores SET last_sequence = last_sequence + 1, memory_count = memory_count + $2 WHERE id = $1 RETURNING last_sequence`, v.StoreID, delta).Scan(&seq); err != nil {
		return fmt.Errorf("take the next change sequence of memory store %s: %w", v.StoreID, err)
	}
	var (
		content []byte
		sha     *string
		size    *int64
	)
	if v.HasContent() {
		content, sha, size = []byte(v.Content), &v.ContentSHA256, &v.ContentSizeBytes
	}
	_, err := t.tx.Exec(ctx, `INSERT INTO memory_versions (id, store_id, memory_id, operation, path, content, content_sha256, content_size_bytes, created_at, created_by_type, created_by_id, sequence) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		v.ID, v.StoreID, v.MemoryID, v.Operation, v.Path, content, sha, size, v.CreatedAt, v.CreatedBy.Kind, v.CreatedBy.ID, seq)
	if err != nil {
		return fmt.Errorf("write memory version: %w", err)
	}
	return nil
}

func (t memoryTx) InsertMemory(ctx context.Context, m storage.MemoryRow) error {
	if _, err := t.tx.Exec(ctx, `INSERT INTO memories (id, store_id, path, content_sha256, content_size_bytes, version_id, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		m.ID, m.StoreID, m.Path, m.ContentSHA256, m.ContentSizeBytes, m.VersionID, m.CreatedAt, m.UpdatedAt); err != nil {
		return fmt.Errorf("create memory: %w", err)
	}
	return nil
}

func (t memoryTx) UpdateMemory(ctx context.Context, m storage.MemoryRow, _ bool) error {
	if _, err := t.tx.Exec(ctx, `UPDATE memories SET path = $1, content_sha256 = $2, content_size_bytes = $3, version_id = $4, updated_at = $5 WHERE id = $6`,
		m.Path, m.ContentSHA256, m.ContentSizeBytes, m.VersionID, m.UpdatedAt, m.ID); err != nil {
		return fmt.Errorf("update memory %s: %w", m.ID, err)
	}
	return nil
}

func (t memoryTx) DeleteMemory(ctx context.Context, memoryID string) error {
	if _, err := t.tx.Exec(ctx, `DELETE FROM memories WHERE id = $1`, memoryID); err != nil {
		return fmt.Errorf("delete memory %s: %w", memoryID, err)
	}
	return nil
}

func (t memoryTx) ReadVersion(ctx context.Context, storeID, versionID string) (storage.VersionRow, error) {
	return getVersion(ctx, t.tx, storeID, versionID)
}

func (t memoryTx) IsHead(ctx context.Context, memoryID, versionID string) (bool, error) {
	var head bool
	err := t.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM memories WHERE id = $1 AND version_id = $2)`, memoryID, versionID).Scan(&head)
	return head, err
}

func (t memoryTx) Redact(ctx context.Context, versionID string, at time.Time, by storage.Actor) error {
	if _, err := t.tx.Exec(ctx, `UPDATE memory_versions SET path = NULL, content = NULL, content_sha256 = NULL, content_size_bytes = NULL, redacted_at = $1, redacted_by_type = $2, redacted_by_id = $3 WHERE id = $4`,
		at, by.Kind, by.ID, versionID); err != nil {
		return fmt.Errorf("redact memory version %s: %w", versionID, err)
	}
	return nil
}

// CreateMemory implements storage.Memories.
func (s *DB) CreateMemory(ctx context.Context, in storage.NewMemory) (storage.MemoryRow, error) {
	sha := in.ContentSHA256()
	var m storage.MemoryRow
	err := s.tx(ctx, func(tx pgx.Tx) (err error) {
		m, err = storage.CreateMemoryIn(ctx, memoryTx{s, tx}, in, sha)
		return err
	})
	return m, err
}

// GetMemory implements storage.Memories.
func (s *DB) GetMemory(ctx context.Context, storeID, memoryID string) (storage.MemoryRow, error) {
	m, err := getMemory(ctx, s.pool, storeID, memoryID, true)
	return m, unavailable(err)
}

// UpdateMemory implements storage.Memories.
func (s *DB) UpdateMemory(ctx context.Context, in storage.MemoryUpdate) (storage.MemoryRow, bool, error) {
	sha := in.ContentSHA256()
	var (
		m       storage.MemoryRow
		changed bool
	)
	err := s.tx(ctx, func(tx pgx.Tx) (err error) {
		m, changed, err = storage.UpdateMemoryIn(ctx, memoryTx{s, tx}, in, sha)
		return err
	})
	return m, changed, err
}

// DeleteMemory implements storage.Memories.
func (s *DB) DeleteMemory(ctx context.Context, storeID, memoryID, expectedSHA256 string, by storage.Actor) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		return storage.DeleteMemoryIn(ctx, memoryTx{s, tx}, storeID, memoryID, expectedSHA256, by)
	})
}

// CountMemories implements storage.Memories.
func (s *DB) CountMemories(ctx context.Context, storeID string) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT memory_count FROM memory_stores WHERE id = $1`, storeID).Scan(&n)
	return n, unavailable(notFound(err))
}

// ListMemories implements storage.Memories: storage.MemoryListing's walk
// of the (store_id, path) index, inside one snapshot.
func (s *DB) ListMemories(ctx context.Context, q storage.MemoryQuery) (storage.Page[storage.MemoryEntry], error) {
	var page storage.Page[storage.MemoryEntry]
	listing, err := storage.PlanListing(q)
	if err != nil {
		return page, err
	}
	err = s.readTx(ctx, func(tx pgx.Tx) error {
		if _, err := getStore(ctx, tx, q.StoreID, false); err != nil {
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
	tx  querier
	q   storage.MemoryQuery
}

func (r memoryRange) Memories(from storage.ListBound, upper string, n int) ([]storage.MemoryRow, error) {
	scan := func(row pgx.Row) (storage.MemoryRow, error) { return scanMemory(row, r.q.WithContent) }
	out, err := queryAll(r.ctx, r.tx, scan, selectMemory(r.q.WithContent)+` WHERE m.store_id = $1 AND m.path `+from.Op()+` $2 AND m.path < $3 ORDER BY m.path LIMIT $4`, r.q.StoreID, from.Key, upper, n)
	if err != nil {
		return nil, fmt.Errorf("list memories: %w", err)
	}
	return out, nil
}

func (r memoryRange) Any(from storage.ListBound, upper string) (bool, error) {
	var one int
	err := r.tx.QueryRow(r.ctx, `SELECT 1 FROM memories WHERE store_id = $1 AND path `+from.Op()+` $2 AND path < $3 LIMIT 1`, r.q.StoreID, from.Key, upper).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// ---- versions ----

const versionColumns = `id, store_id, memory_id, operation, sequence, path, content_sha256, content_size_bytes, created_at, created_by_type, created_by_id, redacted_at, redacted_by_type, redacted_by_id`

func scanVersion(row pgx.Row, withContent bool) (storage.VersionRow, error) {
	var (
		v            storage.VersionRow
		path, sha    *string
		size         *int64
		content      []byte
		redacted     *time.Time
		rbType, rbID *string
	)
	dest := []any{&v.ID, &v.StoreID, &v.MemoryID, &v.Operation, &v.Sequence, &path, &sha, &size, &v.CreatedAt, &v.CreatedBy.Kind, &v.CreatedBy.ID, &redacted, &rbType, &rbID}
	if withContent {
		dest = append(dest, &content)
	}
	if err := row.Scan(dest...); err != nil {
		return v, notFound(err)
	}
	v.Path, v.ContentSHA256, v.Content = deref(path), deref(sha), string(content)
	if size != nil {
		v.ContentSizeBytes = *size
	}
	if redacted != nil {
		v.RedactedAt = *redacted
		v.RedactedBy = storage.Actor{Kind: storage.ActorKind(deref(rbType)), ID: deref(rbID)}
	}
	return v, nil
}

func getVersion(ctx context.Context, q querier, storeID, versionID string) (storage.VersionRow, error) {
	return scanVersion(q.QueryRow(ctx, `SELECT `+versionColumns+`, content FROM memory_versions WHERE id = $1 AND store_id = $2`, versionID, storeID), true)
}

// GetMemoryVersion implements storage.MemoryVersions.
func (s *DB) GetMemoryVersion(ctx context.Context, storeID, versionID string) (storage.VersionRow, error) {
	v, err := getVersion(ctx, s.pool, storeID, versionID)
	return v, unavailable(err)
}

// ListMemoryVersions implements storage.MemoryVersions: newest first is
// id descending.
func (s *DB) ListMemoryVersions(ctx context.Context, q storage.MemoryVersionQuery) (storage.Page[storage.VersionRow], error) {
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
		where = append(where, "id < "+a.add(after))
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
	query := `SELECT ` + cols + ` FROM memory_versions WHERE ` + strings.Join(where, " AND ") + ` ORDER BY id DESC LIMIT ` + a.add(limit+1)
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		if _, err := getStore(ctx, tx, q.StoreID, false); err != nil {
			return err
		}
		scan := func(r pgx.Row) (storage.VersionRow, error) { return scanVersion(r, q.WithContent) }
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
func (s *DB) RedactMemoryVersion(ctx context.Context, storeID, versionID string, by storage.Actor) (storage.VersionRow, error) {
	var v storage.VersionRow
	err := s.tx(ctx, func(tx pgx.Tx) (err error) {
		v, err = storage.RedactVersionIn(ctx, memoryTx{s, tx}, storeID, versionID, by)
		return err
	})
	return v, err
}
