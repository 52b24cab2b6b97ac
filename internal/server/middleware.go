package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/memstore/memstore/internal/requestid"
)

type ctxKey int

const requestLogKey ctxKey = iota

func requestID(ctx context.Context) string { return requestid.From(ctx) }

// withRequestID gives every request an id, echoed in the request-id response
// header and in every log line about it, so a user's report can be matched to
// the server log.
func (s *Server) withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b [12]byte
		rand.Read(b[:])
		id := "req_" + hex.EncodeToString(b[:])
		w.Header().Set("request-id", id)
		next.ServeHTTP(w, r.WithContext(requestid.With(r.Context(), id)))
	})
}

// statusRecorder remembers the status a handler wrote, for the access log.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Flush lets streaming handlers (Server-Sent Events) flush through the recorder.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap exposes the underlying writer to http.ResponseController.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// requestLog is what the access log learns while the request is handled.
type requestLog struct {
	credentialID string // set by authed once the credential is known
	// route is the pattern of the innermost mux that routed the request
	// (set by withRoute): the metrics' label, which never holds a raw id.
	route string
}

// withRoute records, after mux has served the request, the pattern it
// matched. ServeMux sets Pattern on the request it was handed, which is
// not the one the outer middleware holds; so it goes into the requestLog.
// The outermost withRoute runs last and keeps an inner, more precise
// pattern (the API's, inside the console's "/").
func withRoute(mux http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r)
		if rl, ok := r.Context().Value(requestLogKey).(*requestLog); ok && rl.route == "" {
			rl.route = r.Pattern
		}
	})
}

// noteCredential records who made the request, for its access log line.
func noteCredential(r *http.Request, p Principal) {
	if rl, ok := r.Context().Value(requestLogKey).(*requestLog); ok {
		rl.credentialID = p.ID
	}
}

// withAccessLog writes one structured line per request. Credentials are
// never logged: only the credential id once authentication has run, so an
// operator can tell whose key or token made a request. The query string is
// left out too; the path holds ids only.
func (s *Server) withAccessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		rl := &requestLog{}
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), requestLogKey, rl)))
		took := time.Since(start)
		s.metrics.observe(rl.route, rec.status, took)
		if r.URL.Path == "/healthz" {
			return
		}
		level := slog.LevelInfo
		if rec.status >= 500 {
			level = slog.LevelError
		}
		if !s.log.Enabled(r.Context(), level) {
			return // a server logging warnings and up builds no line per request
		}
		attrs := []any{
			"method", r.Method,
			"path", r.URL.Path,
			"status", rec.status,
			"bytes", rec.bytes,
			"duration_ms", float64(took.Microseconds()) / 1000,
		}
		if rl.credentialID != "" {
			attrs = append(attrs, "credential_id", rl.credentialID)
		}
		if id := r.Header.Get("Anthropic-Worker-ID"); id != "" {
			attrs = append(attrs, "worker_id", id)
		}
		s.log.Log(r.Context(), level, "http request", attrs...)
	})
}

var errPanic = errors.New("handler panicked")

// withRecover turns a handler panic into a logged 500 with the envelope, so
// one bad request never takes the server down.
func (s *Server) withRecover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(r.Context(), "handler panic", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				s.writeError(w, r, errPanic)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// withBodyCap limits every request body; decodeJSON turns the overflow into
// a 413.
func (s *Server) withBodyCap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil {
			limit := s.cfg.MaxBodyBytes
			if upload, ok := skillUploadCap(r); ok {
				limit = max(limit, upload)
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		next.ServeHTTP(w, r)
	})
}
