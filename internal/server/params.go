package server

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/validate"
)

// Query and body helpers shared by the list and write endpoints. Every
// refusal names the parameter and the accepted values.

// checkID answers 404 for an id in the URL that is not of the expected
// kind, before storage is asked (validate.ID).
func checkID(prefix, kind, id string) error { return validate.ID("", prefix, kind, id) }

// orMissing answers storage.ErrNotFound with missing(…) for the object
// of the URL, and passes any other error through.
func orMissing(err error, kind, id, list string) error {
	if errors.Is(err, storage.ErrNotFound) {
		return validate.Missing("", kind, id, list)
	}
	return err
}

// Where each kind of object is listed, for missing's messages.
const (
	listEnvironments = "GET /v1/environments"
	listAgents       = "GET /v1/agents"
	listSessions     = "GET /v1/sessions"
	listMemoryStores = "GET /v1/memory_stores"
)

// badCursor is the refusal of a page parameter that the listing did not
// issue.
func badCursor() error {
	return apiErrorf(invalidRequest, "page: not a cursor issued by this listing; pass the next_page value of the previous response unchanged, or omit page to start over")
}

// viewParam reads view, basic or full, with the endpoint's default.
func viewParam(r *http.Request, def string) (string, error) {
	switch v := r.URL.Query().Get("view"); v {
	case "":
		return def, nil
	case api.ViewBasic, api.ViewFull:
		return v, nil
	default:
		return "", apiErrorf(invalidRequest, "view: %q is not a view; send basic (no content) or full (with content)", v)
	}
}

// timeParam reads an RFC 3339 timestamp; nil when absent.
func timeParam(r *http.Request, name string) (*time.Time, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return nil, apiErrorf(invalidRequest, "%s: %q is not an RFC 3339 timestamp; send one such as 2026-05-01T12:00:00Z", name, v)
	}
	t = t.UTC()
	return &t, nil
}

// intParam reads a whole number ≥ 0; 0 when absent.
func intParam(r *http.Request, name string) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, apiErrorf(invalidRequest, "%s: %q is not allowed; send a whole number, 0 or more", name, v)
	}
	return n, nil
}

// checkUnicode refuses a body that is not UTF-8 or that escapes half of a
// surrogate pair, naming the offset.
func checkUnicode(raw []byte) error {
	if !utf8.Valid(raw) {
		i := 0
		for i < len(raw) {
			c, size := utf8.DecodeRune(raw[i:])
			if c == utf8.RuneError && size <= 1 {
				break
			}
			i += size
		}
		return apiErrorf(invalidRequest, "request body is not valid UTF-8 (first bad byte at offset %d); send JSON encoded as UTF-8", i)
	}
	if off := loneSurrogate(raw); off >= 0 {
		return apiErrorf(invalidRequest, "request body has an unpaired UTF-16 surrogate escape at byte %d; text must be valid Unicode, so encode characters outside the BMP as a surrogate pair or as UTF-8", off)
	}
	return nil
}

// loneSurrogate returns the offset of a \uD800–\uDFFF escape inside a JSON
// string that is not part of a high+low pair, or -1.
func loneSurrogate(b []byte) int {
	if !bytes.Contains(b, []byte(`\u`)) { // most bodies: found at the speed of memory
		return -1
	}
	inString := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\' && i+1 < len(b):
			if b[i+1] != 'u' {
				i++
				continue
			}
			u, ok := hex4(b, i+2)
			if !ok {
				return -1 // malformed; the decoder reports it
			}
			switch {
			case u >= 0xDC00 && u <= 0xDFFF:
				return i
			case u >= 0xD800 && u <= 0xDBFF:
				if i+11 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
					if lo, ok := hex4(b, i+8); ok && lo >= 0xDC00 && lo <= 0xDFFF {
						i += 11
						continue
					}
				}
				return i
			}
			i += 5
		}
	}
	return -1
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[at:at+4]), 16, 32)
	return rune(n), err == nil
}
