package api

// ExtensionSearch is GET /v1/memory_stores/{id}/search, memstore's own
// full-text search over a store's memories.
const ExtensionSearch = "search"

// SearchHit is one memory a search found: the memory (basic view, no
// content), an excerpt of it with the words found in **bold**, and its
// score, higher better and comparable only within one search.
type SearchHit struct {
	Type    string  `json:"type"` // "memory_search_hit"
	Memory  Memory  `json:"memory"`
	Snippet string  `json:"snippet"`
	Score   float64 `json:"score"`
}
