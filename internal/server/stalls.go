package server

import (
	"net/http"
	"time"
)

// DefaultStallTimeout is Config.StallTimeout's default.
const DefaultStallTimeout = 30 * time.Second

// withProgressDeadline cuts a response whose client stops taking it: every
// write moves the connection's write deadline to StallTimeout from now, so
// a stream that keeps moving (an event stream, its keepalives, a snapshot
// read at any steady pace) runs as long as it likes, and one whose client
// stalls fails its next write once the socket's buffers are full and
// StallTimeout has passed. The handler sees the write fail and ends,
// letting go of what it held. Without it a client that stopped reading
// held its handler, and a snapshot's read transaction, for ever.
func (s *Server) withProgressDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pw := &progressWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: s.cfg.StallTimeout}
		next.ServeHTTP(pw, r)
		// The connection may serve another request: net/http does not
		// reset a write deadline it did not set.
		if pw.armed {
			pw.rc.SetWriteDeadline(time.Time{})
		}
	})
}

// progressWriter extends the write deadline before each write and flush.
type progressWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	// armed is set once a deadline was set (a recorder in tests has none).
	armed bool
}

func (p *progressWriter) extend() {
	if p.rc.SetWriteDeadline(time.Now().Add(p.timeout)) == nil {
		p.armed = true
	}
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.extend()
	return p.ResponseWriter.Write(b)
}

// FlushError is what http.ResponseController.Flush calls.
func (p *progressWriter) FlushError() error {
	p.extend()
	return p.rc.Flush()
}

// Flush is for handlers that assert http.Flusher (the console's stream).
func (p *progressWriter) Flush() { p.FlushError() }

// Unwrap exposes the underlying writer to http.ResponseController.
func (p *progressWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }
