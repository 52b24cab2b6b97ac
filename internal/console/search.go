package console

import (
	"errors"
	"net/http"
	"strings"

	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/storage"
)

// searchPageSize is how many hits one results page shows.
const searchPageSize = 20

// searchHit is one result as the page shows it: the memory to open and
// its snippet cut into plain and matched runs, so the template marks the
// matches without trusting the memory's text as HTML.
type searchHit struct {
	Memory  storage.MemoryRow
	Snippet []snippetRun
}

type snippetRun struct {
	Text  string
	Match bool
}

// searchPage answers GET /console/stores/{store}/search?q=…: the store's
// memories holding every word of q, best first, a page at a time, each
// linking to the memory. A refused query (empty, too long) shows the form
// again with what was wrong.
func (c *Console) searchPage(w http.ResponseWriter, r *http.Request, q *request) error {
	s, err := c.loadStore(r)
	if err != nil {
		return err
	}
	query := r.URL.Query().Get("q")
	data := struct {
		Store storage.MemoryStoreRow
		Query string
		Hits  []searchHit
		Next  string
		Error string
	}{Store: s, Query: query}
	status := http.StatusOK
	page, err := c.app.SearchStore(r.Context(), app.SearchRequest{StoreID: s.ID, Query: query, Limit: searchPageSize, Page: r.URL.Query().Get("page")})
	switch {
	case errors.Is(err, storage.ErrBadCursor):
		return badRequest("this page link is not valid any more; search again from the first page")
	case invalid(err) != "":
		status, data.Error = http.StatusBadRequest, searchRefusal(query, invalid(err))
	case err != nil:
		return err
	}
	for _, h := range page.Items {
		data.Hits = append(data.Hits, searchHit{Memory: h.Memory, Snippet: snippetRuns(h.Snippet)})
	}
	data.Next = page.Next
	return c.render(w, r, q, status, "search", "Search "+s.Name, data)
}

// searchRefusal words a refused query for the form: the service's words
// name the API's q parameter, which the person never saw.
func searchRefusal(query, msg string) string {
	if strings.TrimSpace(query) == "" {
		return "Type one or more words to search for."
	}
	return "The search box " + strings.TrimPrefix(msg, "q: ")
}

// snippetRuns cuts a snippet at its match markers.
func snippetRuns(snippet string) []snippetRun {
	var out []snippetRun
	for i, part := range strings.Split(snippet, storage.SnippetOpen) {
		if part != "" {
			out = append(out, snippetRun{Text: part, Match: i%2 == 1})
		}
	}
	return out
}
