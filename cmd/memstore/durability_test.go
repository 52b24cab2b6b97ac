package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/testenv"
)

// A `memstore serve` process killed with SIGKILL while writers are busy
// loses no write it acknowledged: after a restart on the same data folder,
// every memory a writer got a 200 for is there with the content it sent.
// (docs/configuration.md says why; power loss is beyond a test.)
func TestServeKilledLosesNoAcknowledgedWrite(t *testing.T) {
	writers, killAfter := testenv.Scale(4, 8), testenv.Scale(60, 4000)
	const key = "sk-memstore-durability"
	data := filepath.Join(t.TempDir(), "data")
	p := serveProcess(t, data, key)
	var store api.MemoryStore
	p.must(t, "POST", "/v1/memory_stores", key, map[string]string{"name": "durable"}, &store)

	var (
		mu    sync.Mutex
		acked = map[string]string{} // path → content SHA-256 of every acknowledged create
		count atomic.Int64
		kill  sync.Once
		wg    sync.WaitGroup
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				path := fmt.Sprintf("/w%d/m%05d.md", w, n)
				content := fmt.Sprintf("writer %d, memory %d\n", w, n)
				body, _ := json.Marshal(api.CreateMemoryRequest{Path: path, Content: content})
				req, _ := http.NewRequest("POST", p.url+"/v1/memory_stores/"+store.ID+"/memories", bytes.NewReader(body))
				req.Header.Set("x-api-key", key)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					return // the server is gone
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					return
				}
				sum := sha256.Sum256([]byte(content))
				mu.Lock()
				acked[path] = hex.EncodeToString(sum[:])
				mu.Unlock()
				if count.Add(1) >= int64(killAfter) {
					kill.Do(func() { p.cmd.Process.Signal(syscall.SIGKILL) })
				}
			}
		}()
	}
	wg.Wait()
	<-p.exited
	if ws := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the server was not killed: %v", p.cmd.ProcessState)
	}

	p = serveProcess(t, data, key)
	stored := map[string]string{}
	page := ""
	for {
		q := url.Values{"limit": {"100"}}
		if page != "" {
			q.Set("page", page)
		}
		var list struct {
			Data     []api.Memory `json:"data"`
			NextPage *string      `json:"next_page"`
		}
		p.must(t, "GET", "/v1/memory_stores/"+store.ID+"/memories?"+q.Encode(), key, nil, &list)
		for _, m := range list.Data {
			stored[m.Path] = m.ContentSHA256
		}
		if list.NextPage == nil {
			break
		}
		page = *list.NextPage
	}
	lost := 0
	for path, sum := range acked {
		if stored[path] != sum {
			lost++
			t.Errorf("acknowledged %s (sha256 %s) is %q after the restart", path, sum, stored[path])
		}
	}
	t.Logf("%d writers; killed after %d acknowledged writes; %d acknowledged in all, %d stored, %d lost", writers, killAfter, len(acked), len(stored), lost)
	p.stop(t, syscall.SIGTERM)
}
