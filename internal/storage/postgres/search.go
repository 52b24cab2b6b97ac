package postgres

import (
	"strings"
)

// tsIndex is the tsvector column memories.search (migration 0008).
type tsIndex struct{}

// Query matches every term through plainto_tsquery (an AND of the words),
// ranks the matches by ts_rank, and reads the content of the page only.
func (tsIndex) Query(terms []string, stores int, subtree bool) (string, string) {
	var b strings.Builder
	b.WriteString(`SELECT h.id, h.store_id, h.path, h.content_sha256, h.content_size_bytes, h.version_id, h.created_at, h.updated_at, ` +
		`v.content, h.score ` +
		`FROM (SELECT m.id, m.store_id, m.path, m.content_sha256, m.content_size_bytes, m.version_id, m.created_at, m.updated_at, ts_rank(m.search, q)::float8 AS score ` +
		`FROM memories m, plainto_tsquery('simple', ?) q WHERE m.search @@ q AND m.store_id IN (?`)
	b.WriteString(strings.Repeat(", ?", stores-1))
	b.WriteString(`)`)
	if subtree {
		b.WriteString(` AND m.path >= ? AND m.path < ?`)
	}
	b.WriteString(` ORDER BY score DESC, m.id LIMIT ? OFFSET ?) h JOIN memory_versions v ON v.id = h.version_id ORDER BY h.score DESC, h.id`)
	return b.String(), strings.Join(terms, " ")
}
