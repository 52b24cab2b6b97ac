package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/server"
	"github.com/memstore/memstore/internal/storage/sqlite"
	"github.com/memstore/memstore/internal/testenv"
)

// Issue 25: a client that opened a snapshot and stopped reading was never
// timed out, and its read transaction kept SQLite from reusing the WAL,
// which grew from 4 MiB to 1.5 GiB under writers and stayed that size.
// Now the stalled reader is cut once StallTimeout passes without progress,
// the snapshot holds no read transaction while it is sent, and the WAL
// stays under 64 MiB while 72 MB is written.
func TestAStalledSnapshotReaderIsCutAndTheWALStaysSmall(t *testing.T) {
	// 72 MB written under a stalled reader (half a minute under -race): a long test.
	testenv.Long(t)
	ctx := context.Background()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "memstore.db")
	db, err := sqlite.Open(ctx, dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := app.New(app.Config{Store: db, Logger: slog.New(slog.DiscardHandler)})
	srv := server.New(server.Config{App: a, StallTimeout: 2 * time.Second, SpoolDir: dir})
	key, _, err := a.Credentials.BootstrapAdminKey(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		a.Close()
		db.Close()
	})
	post := func(path string, body string, out any) {
		req, _ := http.NewRequest("POST", ts.URL+path, strings.NewReader(body))
		req.Header.Set("x-api-key", key)
		req.Header.Set("content-type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			t.Errorf("POST %s: %d %s", path, res.StatusCode, b)
			return
		}
		if out != nil {
			if _, err := fmt.Sscanf(string(b), `{"id":%q`, out); err != nil {
				t.Fatalf("POST %s: no id in %s", path, b)
			}
		}
	}
	content := strings.Repeat("x", 100_000)
	memory := func(p string) string { return fmt.Sprintf(`{"path":%q,"content":%q}`, p, content) }

	// A store whose snapshot (10 MB) is more than the sockets buffer.
	var big, writes string
	post("/v1/memory_stores", `{"name":"big"}`, &big)
	post("/v1/memory_stores", `{"name":"writes"}`, &writes)
	for i := range 100 {
		post("/v1/memory_stores/"+big+"/memories", memory(fmt.Sprintf("/m%03d.md", i)), nil)
	}

	// The stalled reader: a small receive buffer, a request, no reading.
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := dialer.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/memory_stores/%s/snapshot HTTP/1.1\r\nHost: memstore\r\nx-api-key: %s\r\n\r\n", big, key)

	// Writers go on meanwhile: 4 × 180 writes of 100 kB.
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		maxWAL int64
	)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 180 {
				post("/v1/memory_stores/"+writes+"/memories", memory(fmt.Sprintf("/w%d/%03d.md", g, i)), nil)
				if fi, err := os.Stat(dbPath + "-wal"); err == nil {
					mu.Lock()
					maxWAL = max(maxWAL, fi.Size())
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()

	// The server has cut the stalled connection: what it sent ends, and
	// without the end line that marks a complete snapshot.
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := io.ReadAll(conn)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the stalled snapshot connection was still open after the writes and 20 s more (%d bytes came)", len(got))
	}
	if bytes.Contains(got, []byte(`"type":"end"`)) {
		t.Errorf("the stalled reader got the whole snapshot (%d bytes); want it cut", len(got))
	}
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 200")) || !bytes.Contains(got, []byte(api.SequenceHeader)) {
		t.Errorf("the snapshot did not start: %.300q", got)
	}
	const limit = 64 << 20
	if maxWAL > limit {
		t.Errorf("the WAL grew to %d MiB while the reader stalled; want under 64 MiB", maxWAL>>20)
	}
	if fi, err := os.Stat(dbPath + "-wal"); err != nil || fi.Size() > limit {
		t.Errorf("WAL after the writes: %v, %v; want under 64 MiB", fi.Size(), err)
	}
}
