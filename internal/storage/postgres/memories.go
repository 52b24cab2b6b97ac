package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/webhooks"
)

// ---- stores ----

const storeColumns = `id, name, description, metadata, created_at, updated_at, archived_at`

func scanStore(row pgx.Row) (api.MemoryStore, error) {
	var (
		st   api.MemoryStore
		meta string
	)
	if err := row.Scan(&st.ID, &st.Name, &st.Description, &meta, &st.CreatedAt, &st.UpdatedAt, &st.ArchivedAt); err != nil {
		return st, notFound(err)
	}
	st.Type = "memory_store"
	if err := json.Unmarshal([]byte(meta), &st.Metadata); err != nil {
		return st, fmt.Errorf("memory store %s: metadata: %w", st.ID, err)
	}
	if st.Metadata == nil {
		st.Metadata = map[string]string{}
	}
	return st, nil
}

func getStore(ctx context.Context, q querier, id string, lock bool) (api.MemoryStore, error) {
	return scanStore(q.QueryRow(ctx, `SELECT `+storeColumns+` FROM memory_stores WHERE id = $1`+forUpdate(lock), id))
}

// writableStore locks a store for a write to its memories and returns its
// live memory count. The lock orders every write to the store, from every
// replica: the path checks, the precondition, the limit and the version
// ids then see every earlier write and none in flight.
func writableStore(ctx context.Context, tx querier, id string) (count int, err error) {
	var archived *time.Time
	err = tx.QueryRow(ctx, `SELECT memory_count, archived_at FROM memory_stores WHERE id = $1 FOR UPDATE`, id).Scan(&count, &archived)
	if err != nil {
		return 0, notFound(err)
	}
	if archived != nil {
		return 0, storage.ErrStoreArchived
	}
	return count, nil
}

// CreateMemoryStore implements storage.MemoryStores.
func (s *DB) CreateMemoryStore(ctx context.Context, in storage.NewMemoryStore) (api.MemoryStore, error) {
	var st api.MemoryStore
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
func (s *DB) GetMemoryStore(ctx context.Context, id string) (api.MemoryStore, error) {
	st, err := getStore(ctx, s.pool, id, false)
	return st, unavailable(err)
}

// ListMemoryStores implements storage.MemoryStores. Ids sort by creation
// time, so id order is newest first and the last id seen is the cursor.
func (s *DB) ListMemoryStores(ctx context.Context, q storage.MemoryStoreQuery) (storage.Page[api.MemoryStore], error) {
	var (
		page  storage.Page[api.MemoryStore]
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
func (s *DB) UpdateMemoryStore(ctx context.Context, id string, p storage.MemoryStorePatch) (api.MemoryStore, error) {
	var st api.MemoryStore
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
func (s *DB) ArchiveMemoryStore(ctx context.Context, id string) (api.MemoryStore, error) {
	var st api.MemoryStore
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

// memoryRow is a memories row; content is loaded only when asked for.
type memoryRow struct {
	m       api.Memory
	content []byte
}

func (r memoryRow) toAPI(withContent bool) api.Memory {
	m := r.m
	m.Type = "memory"
	if withContent && r.content != nil {
		c := string(r.content)
		m.Content = &c
	}
	return m
}

const memoryColumns = `m.id, m.store_id, m.path, m.content_sha256, m.content_size_bytes, m.version_id, m.created_at, m.updated_at`

// memoryWithContent selects a memory and its head version's content.
const memoryWithContent = `SELECT ` + memoryColumns + `, v.content FROM memories m JOIN memory_versions v ON v.id = m.version_id`

func scanMemory(row pgx.Row, withContent bool) (memoryRow, error) {
	var r memoryRow
	dest := []any{&r.m.ID, &r.m.MemoryStoreID, &r.m.Path, &r.m.ContentSHA256, &r.m.ContentSizeBytes, &r.m.MemoryVersionID, &r.m.CreatedAt, &r.m.UpdatedAt}
	if withContent {
		dest = append(dest, &r.content)
	}
	err := row.Scan(dest...)
	if withContent && err == nil && r.content == nil {
		r.content = []byte{}
	}
	return r, notFound(err)
}

func getMemory(ctx context.Context, q querier, storeID, memoryID string) (api.Memory, error) {
	r, err := scanMemory(q.QueryRow(ctx, memoryWithContent+` WHERE m.id = $1 AND m.store_id = $2`, memoryID, storeID), true)
	if err != nil {
		return api.Memory{}, err
	}
	return r.toAPI(true), nil
}

// pathConflict returns the memory, other than self, that occupies p, is a
// file where p needs a directory (an ancestor of p), or is a file inside p
// (a descendant): the three ways two paths cannot coexist in one store.
func pathConflict(ctx context.Context, tx querier, storeID, p, self string) error {
	var id, at string
	check := func(query string, args ...any) (bool, error) {
		err := tx.QueryRow(ctx, query, args...).Scan(&id, &at)
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

type versionRow struct {
	id, storeID, memoryID, op string
	path                      *string
	content                   *string
	sha                       *string
	size                      *int64
	by                        api.Actor
	at                        time.Time
}

// insertVersion writes a version under its store's next change-feed
// sequence (see migration 0005).
func insertVersion(ctx context.Context, tx querier, v versionRow) error {
	var content []byte
	if v.content != nil {
		content = []byte(*v.content)
	}
	var seq int64
	if err := tx.QueryRow(ctx, `UPDATE memory_stores SET last_sequence = last_sequence + 1 WHERE id = $1 RETURNING last_sequence`, v.storeID).Scan(&seq); err != nil {
		return fmt.Errorf("take the next change sequence of memory store %s: %w", v.storeID, err)
	}
	_, err := tx.Exec(ctx, `INSERT INTO memory_versions (id, store_id, memory_id, operation, path, content, content_sha256, content_size_bytes, created_at, created_by_type, created_by_id, sequence) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		v.id, v.storeID, v.memoryID, v.op, v.path, content, v.sha, v.size, v.at, v.by.Type, storage.ActorID(v.by), seq)
	if err != nil {
		return fmt.Errorf("write memory version: %w", err)
	}
	return nil
}

// CreateMemory implements storage.Memories.
func (s *DB) CreateMemory(ctx context.Context, in storage.NewMemory) (api.Memory, error) {
	if err := storage.CheckActor(in.By); err != nil {
		return api.Memory{}, err
	}
	limit := in.MaxMemories
	if limit <= 0 {
		limit = api.DefaultMaxMemories
	}
	var m api.Memory
	err := s.tx(ctx, func(tx pgx.Tx) error {
		count, err := writableStore(ctx, tx, in.StoreID)
		if err != nil {
			return err
		}
		// The conflict comes first: a client retrying a create whose
		// response it lost learns the memory's id even when the store has
		// filled up since.
		if err := pathConflict(ctx, tx, in.StoreID, in.Path, ""); err != nil {
			return err
		}
		if count >= limit {
			return &storage.StoreFullError{Limit: limit}
		}
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		memID, verID := ids.NewAt(ids.Memory, now), ids.NewAt(ids.MemoryVersion, now)
		sha, size := storage.ContentHash(in.Content), int64(len(in.Content))
		if err := insertVersion(ctx, tx, versionRow{id: verID, storeID: in.StoreID, memoryID: memID, op: api.OperationCreated,
			path: &in.Path, content: &in.Content, sha: &sha, size: &size, by: in.By, at: now}); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO memories (id, store_id, path, content_sha256, content_size_bytes, version_id, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7)`,
			memID, in.StoreID, in.Path, sha, size, verID, now); err != nil {
			return fmt.Errorf("create memory: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE memory_stores SET memory_count = memory_count + 1 WHERE id = $1`, in.StoreID); err != nil {
			return err
		}
		content := in.Content
		m = api.Memory{ID: memID, Type: "memory", MemoryStoreID: in.StoreID, Path: in.Path, Content: &content,
			ContentSHA256: sha, ContentSizeBytes: size, MemoryVersionID: verID, CreatedAt: now, UpdatedAt: now}
		return nil
	})
	return m, err
}

// GetMemory implements storage.Memories.
func (s *DB) GetMemory(ctx context.Context, storeID, memoryID string) (api.Memory, error) {
	m, err := getMemory(ctx, s.pool, storeID, memoryID)
	return m, unavailable(err)
}

// UpdateMemory implements storage.Memories.
func (s *DB) UpdateMemory(ctx context.Context, in storage.MemoryUpdate) (api.Memory, bool, error) {
	if err := storage.CheckActor(in.By); err != nil {
		return api.Memory{}, false, err
	}
	var (
		m       api.Memory
		changed bool
	)
	sha := in.ContentSHA256()
	err := s.tx(ctx, func(tx pgx.Tx) error {
		changed = false
		if _, err := writableStore(ctx, tx, in.StoreID); err != nil {
			return err
		}
		cur, err := getMemory(ctx, tx, in.StoreID, in.MemoryID)
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
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		verID := ids.NewAt(ids.MemoryVersion, now)
		size := int64(len(newContent))
		if err := insertVersion(ctx, tx, versionRow{id: verID, storeID: in.StoreID, memoryID: cur.ID, op: api.OperationModified,
			path: &newPath, content: &newContent, sha: &newSHA, size: &size, by: in.By, at: now}); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE memories SET path = $1, content_sha256 = $2, content_size_bytes = $3, version_id = $4, updated_at = $5 WHERE id = $6`,
			newPath, newSHA, size, verID, now, cur.ID); err != nil {
			return fmt.Errorf("update memory %s: %w", cur.ID, err)
		}
		changed = true
		m = cur
		m.Path, m.Content, m.ContentSHA256, m.ContentSizeBytes, m.MemoryVersionID, m.UpdatedAt = newPath, &newContent, newSHA, size, verID, now
		return nil
	})
	return m, changed, err
}

// DeleteMemory implements storage.Memories.
func (s *DB) DeleteMemory(ctx context.Context, storeID, memoryID, expectedSHA256 string, by api.Actor) error {
	if err := storage.CheckActor(by); err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		// Lock the store (archived or not: deleting is allowed) so the
		// delete is ordered with every other write to it.
		if _, err := getStore(ctx, tx, storeID, true); err != nil {
			return err
		}
		cur, err := scanMemory(tx.QueryRow(ctx, `SELECT `+memoryColumns+` FROM memories m WHERE m.id = $1 AND m.store_id = $2`, memoryID, storeID), false)
		if err != nil {
			return err
		}
		if expectedSHA256 != "" && expectedSHA256 != cur.m.ContentSHA256 {
			return &storage.PreconditionFailedError{CurrentSHA256: cur.m.ContentSHA256}
		}
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		if err := insertVersion(ctx, tx, versionRow{id: ids.NewAt(ids.MemoryVersion, now), storeID: storeID, memoryID: memoryID,
			op: api.OperationDeleted, path: &cur.m.Path, by: by, at: now}); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM memories WHERE id = $1`, memoryID); err != nil {
			return fmt.Errorf("delete memory %s: %w", memoryID, err)
		}
		_, err = tx.Exec(ctx, `UPDATE memory_stores SET memory_count = memory_count - 1 WHERE id = $1`, storeID)
		return err
	})
}

// CountMemories implements storage.Memories.
func (s *DB) CountMemories(ctx context.Context, storeID string) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT memory_count FROM memory_stores WHERE id = $1`, storeID).Scan(&n)
	return n, unavailable(notFound(err))
}

// ListMemories implements storage.Memories: the same walk of the
// (store_id, path) index as the SQLite backend, inside one snapshot.
func (s *DB) ListMemories(ctx context.Context, q storage.MemoryQuery) (storage.Page[api.MemoryListItem], error) {
	var page storage.Page[api.MemoryListItem]
	prefix, from, upper, err := storage.ListStart(q)
	if err != nil {
		return page, err
	}
	limit := storage.ListLimit(q.Limit)
	err = s.readTx(ctx, func(tx pgx.Tx) error {
		page = storage.Page[api.MemoryListItem]{}
		if _, err := getStore(ctx, tx, q.StoreID, false); err != nil {
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
				if dir, ok := storage.RollUp(r.m.Path, prefix, q.Depth); ok {
					page.Items = append(page.Items, api.MemoryListItem{Prefix: &api.MemoryPrefix{Type: "memory_prefix", Path: dir}})
					_, past := storage.SubtreeRange(dir)
					from = storage.ListBound{Key: past}
					rolledUp = true
					break
				}
				m := r.toAPI(q.WithContent)
				page.Items = append(page.Items, api.MemoryListItem{Memory: &m})
				from = storage.ListBound{Key: r.m.Path, Exclusive: true}
			}
			if !rolledUp && len(batch) < want {
				return nil // the range is exhausted
			}
		}
		// The page is full; it has a successor only if something is left.
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM memories WHERE store_id = $1 AND path `+from.Op()+` $2 AND path < $3 LIMIT 1`, q.StoreID, from.Key, upper).Scan(&one)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case err != nil:
			return err
		}
		page.Next = storage.EncodeCursor(storage.CursorMemories, from.Encode())
		return nil
	})
	return page, err
}

func memoryBatch(ctx context.Context, tx querier, q storage.MemoryQuery, from storage.ListBound, upper string, n int) ([]memoryRow, error) {
	sel := `SELECT ` + memoryColumns + ` FROM memories m`
	if q.WithContent {
		sel = memoryWithContent
	}
	scan := func(r pgx.Row) (memoryRow, error) { return scanMemory(r, q.WithContent) }
	out, err := queryAll(ctx, tx, scan, sel+` WHERE m.store_id = $1 AND m.path `+from.Op()+` $2 AND m.path < $3 ORDER BY m.path LIMIT $4`, q.StoreID, from.Key, upper, n)
	if err != nil {
		return nil, fmt.Errorf("list memories: %w", err)
	}
	return out, nil
}

// ---- versions ----

const versionColumns = `id, store_id, memory_id, operation, path, content_sha256, content_size_bytes, created_at, created_by_type, created_by_id, redacted_at, redacted_by_type, redacted_by_id`

func scanVersion(row pgx.Row, withContent bool) (api.MemoryVersion, error) {
	var (
		v              api.MemoryVersion
		content        []byte
		byType, byID   string
		rbType, rbID   *string
		contentPresent bool
	)
	dest := []any{&v.ID, &v.MemoryStoreID, &v.MemoryID, &v.Operation, &v.Path, &v.ContentSHA256, &v.ContentSizeBytes, &v.CreatedAt, &byType, &byID, &v.RedactedAt, &rbType, &rbID}
	if withContent {
		dest = append(dest, &content, &contentPresent)
	}
	if err := row.Scan(dest...); err != nil {
		return v, notFound(err)
	}
	v.Type = "memory_version"
	if contentPresent {
		c := string(content)
		v.Content = &c
	}
	v.CreatedBy = storage.ActorFrom(byType, byID)
	if rbType != nil {
		a := storage.ActorFrom(*rbType, deref(rbID))
		v.RedactedBy = &a
	}
	return v, nil
}

// versionContent selects a version's content and whether it has any (an
// empty memory's content is not NULL; a deletion's or a redacted one's is).
const versionContent = `, content, content IS NOT NULL`

func getVersion(ctx context.Context, q querier, storeID, versionID string) (api.MemoryVersion, error) {
	return scanVersion(q.QueryRow(ctx, `SELECT `+versionColumns+versionContent+` FROM memory_versions WHERE id = $1 AND store_id = $2`, versionID, storeID), true)
}

// GetMemoryVersion implements storage.MemoryVersions.
func (s *DB) GetMemoryVersion(ctx context.Context, storeID, versionID string) (api.MemoryVersion, error) {
	v, err := getVersion(ctx, s.pool, storeID, versionID)
	return v, unavailable(err)
}

// ListMemoryVersions implements storage.MemoryVersions: newest first is
// id descending.
func (s *DB) ListMemoryVersions(ctx context.Context, q storage.MemoryVersionQuery) (storage.Page[api.MemoryVersion], error) {
	var (
		page storage.Page[api.MemoryVersion]
		a    args
	)
	where := []string{"store_id = " + a.add(q.StoreID)}
	if q.Cursor != "" {
		after, err := storage.DecodeCursor(storage.CursorMemoryVersions, q.Cursor)
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
	if q.ActorType != "" {
		where = append(where, "created_by_type = "+a.add(q.ActorType)+" AND created_by_id = "+a.add(q.ActorID))
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
		cols += versionContent
	}
	query := `SELECT ` + cols + ` FROM memory_versions WHERE ` + strings.Join(where, " AND ") + ` ORDER BY id DESC LIMIT ` + a.add(limit+1)
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		if _, err := getStore(ctx, tx, q.StoreID, false); err != nil {
			return err
		}
		scan := func(r pgx.Row) (api.MemoryVersion, error) { return scanVersion(r, q.WithContent) }
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
		page.Next = storage.EncodeCursor(storage.CursorMemoryVersions, page.Items[limit-1].ID)
	}
	return page, nil
}

// RedactMemoryVersion implements storage.MemoryVersions.
func (s *DB) RedactMemoryVersion(ctx context.Context, storeID, versionID string, by api.Actor) (api.MemoryVersion, error) {
	if err := storage.CheckActor(by); err != nil {
		return api.MemoryVersion{}, err
	}
	var v api.MemoryVersion
	err := s.tx(ctx, func(tx pgx.Tx) error {
		// The store's lock orders the redaction with the writes that could
		// make this version a memory's head.
		if _, err := getStore(ctx, tx, storeID, true); err != nil {
			return err
		}
		cur, err := getVersion(ctx, tx, storeID, versionID)
		if err != nil {
			return err
		}
		if cur.RedactedAt != nil {
			v = cur
			return nil
		}
		var head int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM memories WHERE id = $1 AND version_id = $2`, cur.MemoryID, versionID).Scan(&head); err != nil {
			return err
		}
		if head > 0 {
			return storage.ErrRedactHead
		}
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE memory_versions SET path = NULL, content = NULL, content_sha256 = NULL, content_size_bytes = NULL, redacted_at = $1, redacted_by_type = $2, redacted_by_id = $3 WHERE id = $4`,
			now, by.Type, storage.ActorID(by), versionID); err != nil {
			return fmt.Errorf("redact memory version %s: %w", versionID, err)
		}
		v, err = getVersion(ctx, tx, storeID, versionID)
		return err
	})
	return v, err
}
