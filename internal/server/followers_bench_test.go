package server

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
)

// BenchmarkFollowers measures what issue 24 asks of a session's SSE
// followers on SQLite: a thousand streams of one session open on one
// server, then each of b.N appends timed from its request to its arrival
// at every follower (p50 and p95 of the slowest follower's delay, goal
// p95 < 100 ms), and what a follower costs the server: Go heap and stacks,
// goroutines and file descriptors per open stream (goal < 50 kB). The
// clients are raw TCP connections that send the request by hand and read
// with no buffer of their own while the cost is measured, so what grows is
// the server's:
//
//	go test -run '^$' -bench Followers -benchtime 50x ./internal/server/
func BenchmarkFollowers(b *testing.B) {
	const followers = 1000
	e := newCPEnv(b, func(c *cpConfig) {
		c.App.Now = nil
		c.Server.MaxRequestsPerAddress, c.Server.MaxRequestsPerKey = -1, -1
	})
	env := e.environment("followers")
	sess := e.session(env.ID, e.scriptedAgent().ID, nil)
	host := must(url.Parse(e.hs.URL)).Host
	request := fmt.Sprintf("GET /v1/sessions/%s/events/stream HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n", sess.ID, host, e.apiKey)

	before := serverCost()
	conns := make([]net.Conn, followers)
	for i := range conns {
		c, err := net.Dial("tcp", host)
		if err != nil {
			b.Fatalf("follower %d: %v", i, err)
		}
		defer c.Close()
		if _, err := c.Write([]byte(request)); err != nil {
			b.Fatal(err)
		}
		// The headers come once the stream is open.
		head := make([]byte, 0, 512)
		buf := make([]byte, 512)
		for !bytes.Contains(head, []byte("\r\n\r\n")) {
			n, err := c.Read(buf)
			if err != nil {
				b.Fatalf("follower %d: %v", i, err)
			}
			head = append(head, buf[:n]...)
		}
		if !bytes.HasPrefix(head, []byte("HTTP/1.1 200")) {
			b.Fatalf("follower %d: %s", i, head)
		}
		conns[i] = c
	}
	open := serverCost()
	// Each client connection is one descriptor of this process too.
	perFollower := func(x, y float64) float64 { return (y - x) / followers }
	kB := perFollower(before.bytes, open.bytes) / 1024
	fds := perFollower(before.fds, open.fds) - 1
	goroutines := perFollower(before.goroutines, open.goroutines)

	// Each follower's reader notes when each event id arrives.
	type arrival struct {
		id string
		at time.Time
	}
	arrivals := make(chan arrival, followers*4)
	var readers sync.WaitGroup
	for _, c := range conns {
		readers.Add(1)
		go func() {
			defer readers.Done()
			sc := bufio.NewScanner(c)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				if id, ok := bytes.CutPrefix(sc.Bytes(), []byte("id: ")); ok {
					arrivals <- arrival{string(id), time.Now()}
				}
			}
		}()
	}

	msg := map[string]any{"events": []api.Event{api.UserMessage(`{"tool_calls":[]}`)}}
	lat := make([]time.Duration, 0, b.N)
	firsts := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		var sent api.SendEventsResponse
		e.must(200, "POST", "/v1/sessions/"+sess.ID+"/events", e.apiKey, msg, &sent)
		want := sent.Data[0].ID
		got, first, last := 0, time.Time{}, time.Time{}
		timeout := time.After(30 * time.Second)
		for got < followers {
			select {
			case a := <-arrivals:
				if a.id == want {
					if got == 0 {
						first = a.at
					}
					got++
					last = a.at
				}
			case <-timeout:
				b.Fatalf("event %s reached %d of %d followers in 30 s", want, got, followers)
			}
		}
		lat = append(lat, last.Sub(start))
		firsts = append(firsts, first.Sub(start))
	}
	b.StopTimer()
	for _, c := range conns {
		c.Close()
	}
	readers.Wait()
	slices.Sort(lat)
	slices.Sort(firsts)
	ms := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
	}
	// The first follower's delay is the append's own part of it.
	firstMS := float64(firsts[len(firsts)/2].Microseconds()) / 1000
	b.ReportMetric(firstMS, "first-p50-ms")
	b.ReportMetric(ms(0.50), "fanout-p50-ms")
	b.ReportMetric(ms(0.95), "fanout-p95-ms")
	b.ReportMetric(kB, "kB/follower")
	b.ReportMetric(fds, "fds/follower")
	b.ReportMetric(goroutines, "goroutines/follower")
	b.Logf("%d followers of one session: to the first p50 %.1f ms, fan-out to all p50 %.1f ms, p95 %.1f ms (goal p95 < 100 ms); per follower %.1f kB (goal < 50 kB), %.2f descriptors, %.1f goroutines",
		followers, firstMS, ms(0.50), ms(0.95), kB, fds, goroutines)
}

// cost is what the process holds: Go heap and stacks in use, descriptors
// and goroutines.
type cost struct{ bytes, fds, goroutines float64 }

func serverCost() cost {
	time.Sleep(200 * time.Millisecond) // let the last streams settle
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	fds, _ := os.ReadDir("/proc/self/fd")
	return cost{bytes: float64(m.HeapInuse + m.StackInuse), fds: float64(len(fds)), goroutines: float64(runtime.NumGoroutine())}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
