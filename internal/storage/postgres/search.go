package postgres

import (
	"strconv"
	"strings"

	"github.com/memstore/memstore/internal/storage"
)

// tsIndex is the tsvector column memories.search (migration 0008).
type tsIndex struct{}

// Query matches every term through plainto_tsquery (an AND of the words)
// and ranks by ts_rank only the newest storage.SearchCandidates matches in
// the stores (ids grow with creation time): ts_rank reads each match's
// whole tsvector, so ranking every match of a common word costs hundreds
// of milliseconds, while picking the candidates reads only ids (the GIN
// index for a rare word, the primary key backwards for a common one, as
// the planner judges). It reads the content of the page only.
func (tsIndex) Query(terms []string, stores int, subtree bool) (string, string) {
	var b strings.Builder
	b.WriteString(`SELECT h.id, h.store_id, h.path, h.content_sha256, h.content_size_bytes, h.version_id, h.created_at, h.updated_at, ` +
		`v.content, h.score ` +
		`FROM (SELECT m.id, m.store_id, m.path, m.content_sha256, m.content_size_bytes, m.version_id, m.created_at, m.updated_at, ts_rank(m.search, c.q)::float8 AS score ` +
		`FROM (SELECT m.id, q FROM memories m, plainto_tsquery('simple', ?) q WHERE m.search @@ q AND m.store_id IN (?`)
	b.WriteString(strings.Repeat(", ?", stores-1))
	b.WriteString(`)`)
	if subtree {
		b.WriteString(` AND m.path >= ? AND m.path < ?`)
	}
	b.WriteString(` ORDER BY m.id DESC LIMIT ` + strconv.Itoa(storage.SearchCandidates) + `) c JOIN memories m ON m.id = c.id ` +
		`ORDER BY score DESC, m.id LIMIT ? OFFSET ?) h JOIN memory_versions v ON v.id = h.version_id ORDER BY h.score DESC, h.id`)
	return b.String(), strings.Join(terms, " ")
}
