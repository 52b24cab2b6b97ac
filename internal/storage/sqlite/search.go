package sqlite

import (
	"strconv"
	"strings"

	"github.com/memstore/memstore/internal/storage"
)

// ftsIndex is the FTS5 table memory_search (migration 0011).
type ftsIndex struct{}

// Query matches every term as a quoted FTS5 string (terms hold only
// letters and digits, so none needs escaping), ranked by bm25 with a path
// match weighing twice a content match. The candidates are the newest
// storage.SearchCandidates matches in the stores: FTS5 walks its doclist
// backwards by rowid (a memory's docid grows with its creation) and stops
// there, so bm25 runs for those only, however common the words. It ranks
// first and reads the content of the page only. CROSS JOIN keeps the index
// the outer loop: left to itself the planner may walk the store's memories
// and probe the index for each.
func (ftsIndex) Query(terms []string, stores int, subtree bool) (string, string) {
	quoted := make([]string, len(terms))
	for i, t := range terms {
		quoted[i] = `"` + t + `"`
	}
	var b strings.Builder
	b.WriteString(`SELECT h.id, h.store_id, h.path, h.content_sha256, h.content_size_bytes, h.version_id, h.created_at, h.updated_at, v.content, -h.rank FROM (` +
		`SELECT * FROM (` +
		`SELECT m.id, m.store_id, m.path, m.content_sha256, m.content_size_bytes, m.version_id, m.created_at, m.updated_at, bm25(memory_search, 2.0, 1.0) AS rank ` +
		`FROM memory_search CROSS JOIN memory_search_docs d ON d.docid = memory_search.rowid CROSS JOIN memories m ON m.id = d.memory_id ` +
		`WHERE memory_search MATCH ? AND m.store_id IN (?`)
	b.WriteString(strings.Repeat(", ?", stores-1))
	b.WriteString(`)`)
	if subtree {
		b.WriteString(` AND m.path >= ? AND m.path < ?`)
	}
	b.WriteString(` ORDER BY memory_search.rowid DESC LIMIT ` + strconv.Itoa(storage.SearchCandidates) + `) ` +
		`ORDER BY rank, id LIMIT ? OFFSET ?) h JOIN memory_versions v ON v.id = h.version_id ORDER BY h.rank, h.id`)
	return b.String(), strings.Join(quoted, " ")
}

// Entry leaves the index to the FTS5 triggers: FTS5 splits a memory's words
// in the same transaction at a small cost (docs/search.md).
func (ftsIndex) Entry(path, content string) (string, any) { return "", nil }
