package sqlite

import (
	"strings"

	"github.com/memstore/memstore/internal/storage"
)

// ftsIndex is the FTS5 table memory_search (migration 0011).
type ftsIndex struct{}

// Query matches every term as a quoted FTS5 string (terms hold only
// letters and digits, so none needs escaping), ranked by bm25 with a path
// match weighing twice a content match.
func (ftsIndex) Query(terms []string, stores int, subtree bool) (string, string) {
	quoted := make([]string, len(terms))
	for i, t := range terms {
		quoted[i] = `"` + t + `"`
	}
	var b strings.Builder
	b.WriteString(`SELECT m.id, m.store_id, m.path, m.content_sha256, m.content_size_bytes, m.version_id, m.created_at, m.updated_at, ` +
		`snippet(memory_search, -1, '` + storage.SnippetOpen + `', '` + storage.SnippetClose + `', '` + storage.SnippetEllipsis + `', 24), ` +
		`-bm25(memory_search, 2.0, 1.0) ` +
		`FROM memory_search JOIN memory_search_docs d ON d.docid = memory_search.rowid JOIN memories m ON m.id = d.memory_id ` +
		`WHERE memory_search MATCH ? AND m.store_id IN (?`)
	b.WriteString(strings.Repeat(", ?", stores-1))
	b.WriteString(`)`)
	if subtree {
		b.WriteString(` AND m.path >= ? AND m.path < ?`)
	}
	b.WriteString(` ORDER BY bm25(memory_search, 2.0, 1.0), m.id LIMIT ? OFFSET ?`)
	return b.String(), strings.Join(quoted, " ")
}
