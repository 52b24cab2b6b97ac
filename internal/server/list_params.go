package server

import (
	"net/url"
	"strconv"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// The query parameters of the lists: limit, page (an opaque cursor),
// order, and the booleans and arrays some lists filter by.

// listLimitParam reads limit: absent is api.DefaultListLimit, otherwise 1
// to max. clamp lowers a larger value to max instead of refusing it (the
// event list, which the official worker reads 1,000 at a time).
func listLimitParam(q url.Values, max int, clamp bool) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return api.DefaultListLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, apiErrorf(invalidRequest, "limit must be a whole number from 1 to %d, got %q", max, v)
	}
	if n > max {
		if clamp {
			return max, nil
		}
		return 0, apiErrorf(invalidRequest, "limit must be a whole number from 1 to %d, got %d; page through with next_page", max, n)
	}
	return n, nil
}

// listing is the paging of a control-plane list, read from limit and page:
// the page shows up to limit items after position after ("" for the first
// page). Storage is asked for one row more, which tells whether a next
// page exists. Cursors name the list (kind), so that one list's cursor is
// refused by another.
type listing struct {
	kind  string
	limit int
	after string
}

// listParams reads limit (see listLimitParam) and page for a list of kind.
func listParams(q url.Values, kind string, max int, clamp bool) (listing, error) {
	l := listing{kind: kind}
	var err error
	if l.limit, err = listLimitParam(q, max, clamp); err != nil {
		return l, err
	}
	if v := q.Get("page"); v != "" {
		if l.after, err = storage.DecodeCursor(kind, v); err != nil {
			return l, badCursor()
		}
	}
	return l, nil
}

// query is the storage query for the page.
func (l listing) query(includeArchived bool) storage.ListQuery {
	return storage.ListQuery{After: l.after, Limit: l.limit + 1, IncludeArchived: includeArchived}
}

// cutPage turns the rows storage returned for l into the page: the first
// limit of them in their wire form, and a next_page at the last one shown
// when a row was left over. pos is a row's position for the cursor.
func cutPage[S, T any](l listing, rows []S, pos func(S) string, wire func(S) T) api.Page[T] {
	page := api.Page[T]{Data: make([]T, 0, min(len(rows), l.limit))}
	for i, x := range rows {
		if i == l.limit {
			next := storage.EncodeCursor(l.kind, pos(rows[i-1]))
			page.NextPage = &next
			break
		}
		page.Data = append(page.Data, wire(x))
	}
	return page
}

// orderParam reads order, asc or desc; absent is the list's default.
func orderParam(q url.Values, defaultAsc bool) (asc bool, err error) {
	switch v := q.Get("order"); v {
	case "":
		return defaultAsc, nil
	case "asc", "desc":
		return v == "asc", nil
	default:
		return false, apiErrorf(invalidRequest, "order must be asc or desc, got %q", v)
	}
}

func boolParam(q url.Values, name string) (bool, error) {
	v := q.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, apiErrorf(invalidRequest, "%s must be true or false, got %q", name, v)
	}
	return b, nil
}

// arrayParam reads a repeated query parameter in either spelling: the
// official SDKs send name[]=a&name[]=b, curl users often name=a&name=b.
func arrayParam(q url.Values, name string) []string {
	return append(append([]string(nil), q[name+"[]"]...), q[name]...)
}
