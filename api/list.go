package api

// Page is one page of a list response. NextPage is an opaque cursor: the next
// page is the same request with page=<cursor>; nil means this is the last page.
type Page[T any] struct {
	Data     []T     `json:"data"`
	NextPage *string `json:"next_page"`
}

// List limits shared by every list endpoint.
const (
	DefaultListLimit = 20
	MaxListLimit     = 100
)
