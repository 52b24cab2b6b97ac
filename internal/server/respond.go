package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// Short aliases for the error types used all over the handlers.
const (
	invalidRequest = api.InvalidRequest
	notFound       = api.NotFound
	permission     = api.Permission
)

func apiErrorf(t api.ErrorType, format string, args ...any) *api.Error {
	return api.Errorf(t, format, args...)
}

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// writeError answers with the error envelope. An *api.Error is sent as is;
// storage.ErrNotFound becomes a 404; anything else is logged and becomes a
// 500 whose message carries the request id for the operator.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *api.Error
	switch {
	case errors.Is(err, errBodyTimeout):
		// The rest of the body may still come: this connection is done.
		w.Header().Set("Connection", "close")
		ae = s.bodyTimeout()
	case errors.As(err, &ae):
	case errors.Is(err, storage.ErrNotFound):
		ae = apiErrorf(notFound, "not found: %s", r.URL.Path)
	case errors.Is(err, storage.ErrOutcomeUnknown):
		// The connection broke between the COMMIT and its answer: the
		// write may have landed. Repeated blindly it would be refused
		// (a create's path taken, a guarded update's hash stale) or
		// applied twice, so the client is told to read first.
		s.log.WarnContext(r.Context(), "database connection lost at a COMMIT; the write may have landed", "method", r.Method, "path", r.URL.Path, "err", err)
		ae = apiErrorf(api.Internal, "the database connection failed as this write was committed, so whether it landed is unknown: read it back before writing it again")
		ae.StatusCode = http.StatusServiceUnavailable
		w.Header().Set("x-should-retry", "false")
	case errors.Is(err, storage.ErrUnavailable):
		// The database is away (restarting, failing over): the request
		// changed nothing, and the pool reconnects by itself, so the
		// client is told to retry.
		s.log.WarnContext(r.Context(), "database unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		ae = apiErrorf(api.Internal, "the database is unavailable; retry shortly")
		ae.StatusCode = http.StatusServiceUnavailable
		w.Header().Set("x-should-retry", "true")
	default:
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		ae = apiErrorf(api.Internal, "internal error; the server log has the details under request_id %s", requestID(r.Context()))
	}
	status := ae.Type.Status()
	if ae.StatusCode != 0 {
		status = ae.StatusCode
	}
	// Conflicts and refusals are answers, not transient failures: tell
	// retrying clients (the official SDKs retry 409 and 5xx by default) not
	// to repeat them. Server faults and overload stay retryable.
	if status < 500 && status != http.StatusTooManyRequests {
		w.Header().Set("x-should-retry", "false")
	}
	writeJSON(w, status, api.ErrorEnvelope{Type: "error", Error: ae})
}

// decodeJSON reads the request body into v. Malformed JSON, a wrong type or
// trailing data is a 400 naming the problem; a body over the cap is a 413.
// Unknown fields are ignored, as clients may send newer fields.
func decodeJSON(r *http.Request, v any) error {
	raw, err := readBody(r)
	if err != nil {
		return bodyError(err)
	}
	return decodeBody(raw, v)
}

// decodeOptionalJSON is decodeJSON for endpoints whose body may be absent
// (the official SDK sends no body on some POSTs).
func decodeOptionalJSON(r *http.Request, v any) error {
	raw, err := readBody(r)
	if err != nil {
		return bodyError(err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	return decodeBody(raw, v)
}

// readBody reads the whole body into one buffer of the size the client
// announced: io.ReadAll grows from 512 bytes, copying a 4 KB memory's body
// at each growth before it is decoded (docs/postgresql-performance.md).
// An announced size is trusted only up to presizeMax; the body cap
// (withBodyCap) bounds what is read whatever the header says.
func readBody(r *http.Request) ([]byte, error) {
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 {
		buf.Grow(int(min(n, presizeMax)) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(r.Body)
	return buf.Bytes(), err
}

// presizeMax bounds the buffer readBody allocates before a byte arrives.
const presizeMax = 1 << 20

// decodeBody decodes a whole body into v. Text is taken byte for byte:
// bytes that are not UTF-8 and escaped lone surrogates (\ud800) are refused
// first, because encoding/json would silently replace both with U+FFFD, and
// the server would then store (and, for memories, hash) text the client
// never sent; a client comparing hashes would see a conflict forever.
//
// json.Unmarshal reads the body where it lies; a json.Decoder would copy
// it into a buffer of its own first. Its syntax errors are told apart
// here to say what a Decoder's did: nothing, a truncated value, or data
// after the object.
func decodeBody(raw []byte, v any) error {
	if err := checkUnicode(raw); err != nil {
		return err
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return bodyError(io.EOF)
	}
	if f, ok := v.(fastDecoder); ok && f.decodeFast(raw) {
		return nil
	}
	err := json.Unmarshal(raw, v)
	var syntax *json.SyntaxError
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &syntax):
		return bodyError(err)
	case strings.HasSuffix(syntax.Error(), "after top-level value"):
		return apiErrorf(invalidRequest, "request body must be a single JSON object; found extra data after it")
	case syntax.Error() == "unexpected end of JSON input":
		return bodyError(io.ErrUnexpectedEOF)
	default:
		return bodyError(err)
	}
}

func bodyError(err error) error {
	var (
		tooLarge *http.MaxBytesError
		syntax   *json.SyntaxError
		typ      *json.UnmarshalTypeError
	)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return errBodyTimeout
	case errors.As(err, &tooLarge):
		return apiErrorf(api.RequestTooLarge, "request body exceeds %d bytes; send a smaller body (memory content is limited to %d bytes)", tooLarge.Limit, api.MaxContentBytes)
	case errors.Is(err, io.EOF):
		return apiErrorf(invalidRequest, "request body is empty; send a JSON object")
	case errors.As(err, &syntax):
		return apiErrorf(invalidRequest, "request body is not valid JSON (at byte %d): %v", syntax.Offset, err)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return apiErrorf(invalidRequest, "request body must be a JSON object, got %s", typ.Value)
		}
		return apiErrorf(invalidRequest, "%s: expected %s, got %s", field, jsonKind(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return apiErrorf(invalidRequest, "request body is truncated JSON; send a complete JSON object")
	default:
		return apiErrorf(invalidRequest, "request body could not be read: %v", err)
	}
}

func jsonKind(goKind string) string {
	switch {
	case goKind == "string":
		return "a string"
	case goKind == "bool":
		return "a boolean"
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"), strings.HasPrefix(goKind, "float"):
		return "a number"
	case goKind == "slice" || goKind == "array":
		return "an array"
	case goKind == "map" || goKind == "struct" || goKind == "ptr":
		return "an object"
	default:
		return fmt.Sprintf("a %s", goKind)
	}
}
