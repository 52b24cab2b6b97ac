package server

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/secret"
)

// Defaults of the server's own limits on what one client may hold.
const (
	// DefaultBodyReadTimeout bounds the reading of one request body: a 1 MiB
	// body needs far less, and a client that stalls holds a connection and
	// a handler for no more than this.
	DefaultBodyReadTimeout = 30 * time.Second
	// DefaultMaxRequestsPerAddress caps the requests in flight from one
	// client address. Workers hold an event stream per session they serve,
	// so it leaves room for a busy worker host.
	DefaultMaxRequestsPerAddress = 512
	// DefaultMaxRequestsPerKey caps the requests in flight made with one
	// credential.
	DefaultMaxRequestsPerKey = 256
)

// withCanonicalPath answers a URL path with "..", "." or empty segments
// itself, with the error envelope. Go's ServeMux would otherwise redirect
// it (307, HTML body) to a cleaned path the client never asked for.
func (s *Server) withCanonicalPath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		clean := path.Clean(p)
		if strings.HasSuffix(p, "/") && clean != "/" {
			clean += "/"
		}
		if p != clean || !strings.HasPrefix(p, "/") {
			s.writeError(w, r, apiErrorf(notFound, "no route for the path %q: it has an empty, \".\" or \"..\" segment, which memstore never resolves; send the path as the API reference spells it", p))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// withBodyDeadline bounds the time a client may take to send a request
// body, with or without a credential: the connection's read deadline is set
// when the request starts and lifted once the body has been read, so a
// long-lived response (an event stream) is not cut. A body that is not in
// by then is answered 408 (see bodyError); one a handler never reads (a
// refused credential) bounds the server's discarding of it instead.
func (s *Server) withBodyDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(s.cfg.BodyReadTimeout)); err == nil {
			r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { rc.SetReadDeadline(time.Time{}) }}
		}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the read deadline once the body has been read whole.
type deadlineBody struct {
	io.ReadCloser
	lift func()
	once sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		b.once.Do(b.lift)
	}
	return n, err
}

// errBodyTimeout is bodyError's answer to a body read past its deadline;
// writeError turns it into the 408, which names the server's bound.
var errBodyTimeout = errors.New("request body not received in time")

// bodyTimeout is the 408 of a body not received within BodyReadTimeout.
func (s *Server) bodyTimeout() *api.Error {
	e := apiErrorf(invalidRequest, "the request body was not received within %s; send the whole body without pausing, then retry", s.cfg.BodyReadTimeout)
	e.StatusCode = http.StatusRequestTimeout
	return e
}

// limiter counts the requests in flight per client address and per
// credential, so that no one client can hold every connection or handler.
type limiter struct {
	perAddress, perKey int
	mu                 sync.Mutex
	inFlight           map[string]int
}

func newLimiter(perAddress, perKey int) *limiter {
	return &limiter{perAddress: perAddress, perKey: perKey, inFlight: map[string]int{}}
}

// acquire admits a request from addr with the credential hash key ("" for
// none), or names the limit it would break.
func (l *limiter) acquire(addr, key string) (release func(), refused string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, k := "addr:"+addr, "key:"+key
	if l.perAddress > 0 && l.inFlight[a] >= l.perAddress {
		return nil, "address"
	}
	if key != "" && l.perKey > 0 && l.inFlight[k] >= l.perKey {
		return nil, "key"
	}
	l.inFlight[a]++
	if key != "" {
		l.inFlight[k]++
	}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, id := range []string{a, k} {
			if id == k && key == "" {
				continue
			}
			if l.inFlight[id]--; l.inFlight[id] == 0 {
				delete(l.inFlight, id)
			}
		}
	}, ""
}

// withLimits answers 429 with retry-after to a request over the in-flight
// limit of its address or its credential. /healthz is never limited, so a
// monitor still sees a busy server as up.
func (s *Server) withLimits(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		addr, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			addr = r.RemoteAddr
		}
		key := ""
		if sent := credentialFrom(r); sent != "" {
			key = secret.Hash(sent)
		}
		release, refused := s.limits.acquire(addr, key)
		if refused != "" {
			limit := s.limits.perAddress
			if refused == "key" {
				limit = s.limits.perKey
			}
			w.Header().Set("retry-after", "1")
			s.writeError(w, r, apiErrorf(api.RateLimit, "too many requests in flight from this %s (the limit is %d at a time); wait for some to finish and retry, or raise the server's limit (memstore serve --max-requests-per-%s)", refused, limit, refused))
			return
		}
		defer release()
		next.ServeHTTP(w, r)
	})
}
