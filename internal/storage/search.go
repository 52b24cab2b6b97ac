package storage

import (
	"context"
	"iter"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Search finds memories by the words of their current content and path.
// Each backend keeps its own full-text index (SQLite FTS5, PostgreSQL
// tsvector), written in the transaction of every memory write, so a hit is
// always a live memory's head version: deleted memories and older (and so
// redacted) versions are never found.
type Search interface {
	// SearchMemories returns the memories of q.StoreIDs holding every term
	// of q.Terms, best match first. A store that does not exist is
	// skipped; the caller decides who may read which store.
	SearchMemories(ctx context.Context, q SearchQuery) (Page[SearchHit], error)
}

// SearchCursor is the kind of a search's page cursors: its key is the
// offset of the next page. Ranked results have no stable key to resume
// after, so a page is an offset into the ranking as it is when asked.
const SearchCursor = "search"

// SearchCandidates bounds how many matches a search ranks: the most
// recently created ones. Ranking costs each match a lookup of its
// statistics, so a word in a tenth of 100,000 memories would cost hundreds
// of milliseconds; past this many, a query is too broad to rank well
// anyway, and one more word narrows it. Pages end with the last candidate.
const SearchCandidates = 1000

// SearchQuery is the input of SearchMemories.
type SearchQuery struct {
	// StoreIDs are the stores to search, at least one.
	StoreIDs []string
	// Terms are the words every hit holds, from SearchTerms.
	Terms []string
	// PathPrefix limits hits to the subtree under it ("" or "/" for all).
	PathPrefix string
	Limit      int
	Cursor     string // a Page.Next from the same search, or ""
}

// SearchHit is one found memory (without its content), with an excerpt
// around the words found (see Snippet) and its score: higher is better, comparable only
// within one search.
type SearchHit struct {
	Memory  MemoryRow
	Snippet string
	Score   float64
}

// SnippetOpen and SnippetClose surround each matched word in a snippet
// (Markdown bold, which most memories are written in), and SnippetEllipsis
// marks text cut from either end.
const (
	SnippetOpen     = "**"
	SnippetClose    = "**"
	SnippetEllipsis = "…"
)

// SearchTerms splits a query into the words a full-text index knows
// (SearchWords), each once. Punctuation separates words and is not
// searchable, in both backends' indexes alike, so a query is never a
// syntax the index could misread.
func SearchTerms(query string) []string {
	var terms []string
	seen := map[string]bool{}
	for w := range SearchWords(query) {
		if !seen[w] {
			seen[w] = true
			terms = append(terms, w)
		}
	}
	return terms
}

// SearchWords yields the words of text in order, as the search indexes
// know them: runs of letters and digits, lower-cased. It is the one rule
// for a query's words and, on PostgreSQL, for a memory's (which the server
// computes so the store's transaction does not; see postgres.tsIndex).
func SearchWords(text string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for from, to := range wordSpans(text) {
			if !yield(strings.ToLower(text[from:to])) {
				return
			}
		}
	}
}

// wordSpans yields where each word of text starts and ends: runs of letters
// and digits (WordByte, WordRune), the one word rule of the index, the
// queries and the snippets. A byte that is not UTF-8 separates words.
func wordSpans(text string) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		start := -1
		for i := 0; i < len(text); {
			word, size := wordAt(text, i)
			switch {
			case word && start < 0:
				start = i
			case !word && start >= 0:
				if !yield(start, i) {
					return
				}
				start = -1
			}
			i += size
		}
		if start >= 0 {
			yield(start, len(text))
		}
	}
}

// wordAt reports whether the character at text[i] belongs to a word, and
// its size in bytes.
func wordAt(text string, i int) (word bool, size int) {
	if c := text[i]; c < utf8.RuneSelf {
		return WordByte(c), 1
	}
	r, size := utf8.DecodeRuneInString(text[i:])
	return WordRune(r), size
}

// WordRune reports whether r belongs to a word: a letter or a digit.
func WordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// WordByte is WordRune for an ASCII byte, from a table (false for any
// other byte): most text is ASCII, and a memory's search entry reads every
// byte of every write.
func WordByte(c byte) bool { return wordBytes[c] }

var wordBytes = func() (t [256]bool) {
	for c := range utf8.RuneSelf {
		t[c] = WordRune(rune(c))
	}
	return t
}()

// snippetWords is how many words a snippet shows.
const snippetWords = 24

// Snippet cuts the excerpt of content a hit shows: snippetWords words
// from shortly before the first word of terms, each word of terms marked.
// It is cut here, for the page only, rather than by each index: one rule
// for both backends, and no snippet for matches that never reach a page.
func Snippet(content string, terms []string) string {
	type span struct{ from, to int }
	var words []span
	for from, to := range wordSpans(content) {
		words = append(words, span{from, to})
	}
	if len(words) == 0 {
		return ""
	}
	isTerm := func(s span) bool { return slices.Contains(terms, strings.ToLower(content[s.from:s.to])) }
	first := 0
	for i, w := range words {
		if isTerm(w) {
			first = max(0, i-snippetWords/4)
			break
		}
	}
	last := min(len(words), first+snippetWords)
	var b strings.Builder
	if first > 0 {
		b.WriteString(SnippetEllipsis)
	}
	at := words[first].from
	for _, w := range words[first:last] {
		b.WriteString(content[at:w.from])
		if isTerm(w) {
			b.WriteString(SnippetOpen + content[w.from:w.to] + SnippetClose)
		} else {
			b.WriteString(content[w.from:w.to])
		}
		at = w.to
	}
	if last < len(words) {
		b.WriteString(SnippetEllipsis)
	}
	return b.String()
}
