package sqlstore

import (
	"context"
	"strconv"

	"github.com/memstore/memstore/internal/storage"
)

// SearchMemories runs the backend's index for q, a page at a time; a
// page's cursor is the offset of the next one.
func (s *Store) SearchMemories(ctx context.Context, q storage.SearchQuery) (storage.Page[storage.SearchHit], error) {
	var page storage.Page[storage.SearchHit]
	if len(q.StoreIDs) == 0 || len(q.Terms) == 0 {
		return page, nil
	}
	offset := 0
	if q.Cursor != "" {
		key, err := storage.DecodeCursor(storage.SearchCursor, q.Cursor)
		if err != nil {
			return page, err
		}
		if offset, err = strconv.Atoi(key); err != nil || offset < 0 {
			return page, storage.ErrBadCursor
		}
	}
	subtree := q.PathPrefix != "" && q.PathPrefix != "/"
	query, match := s.d.Search.Query(q.Terms, len(q.StoreIDs), subtree)
	args := []any{match}
	for _, id := range q.StoreIDs {
		args = append(args, id)
	}
	if subtree {
		_, upper := storage.SubtreeRange(q.PathPrefix)
		args = append(args, q.PathPrefix, upper)
	}
	// One more than asked tells whether another page follows.
	args = append(args, q.Limit+1, offset)
	err := s.read(ctx, func(c Conn) error {
		page.Items = page.Items[:0]
		rows, err := c.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var h storage.SearchHit
			var content []byte
			m := &h.Memory
			if err := rows.Scan(&m.ID, &m.StoreID, &m.Path, &m.ContentSHA256, &m.ContentSizeBytes, &m.VersionID, &m.CreatedAt, &m.UpdatedAt, &content, &h.Score); err != nil {
				return err
			}
			h.Snippet = storage.Snippet(string(content), q.Terms)
			page.Items = append(page.Items, h)
		}
		return rows.Err()
	})
	if err != nil {
		return storage.Page[storage.SearchHit]{}, err
	}
	if len(page.Items) > q.Limit {
		page.Items = page.Items[:q.Limit]
		page.Next = storage.EncodeCursor(storage.SearchCursor, strconv.Itoa(offset+q.Limit))
	}
	return page, nil
}
