package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
)

// BenchmarkFanOut measures event fan-out: from an event appended through
// one server to its arrival at an SSE client of another server on the same
// database (PostgreSQL: LISTEN/NOTIFY between two servers; SQLite: one
// process, so the same server), reporting p50 and p95. It sits beside
// BenchmarkBackends (internal/storage/postgres), which compares the
// backends' write and claim rates:
//
//	go test -run '^$' -bench FanOut -benchtime 200x ./internal/server/
func BenchmarkFanOut(b *testing.B) {
	b.Run("sqlite/same-process", func(b *testing.B) {
		e := newCPEnv(b, func(c *cpConfig) { c.App.Now = nil })
		fanOut(b, e, e)
	})
	b.Run("postgres/replica-to-replica", func(b *testing.B) {
		rs := replicas(b, 2)
		fanOut(b, rs[0], rs[1])
	})
}

func fanOut(b *testing.B, from, to *cpEnv) {
	env := from.environment("fan-out")
	sess := from.session(env.ID, from.scriptedAgent().ID, nil)

	req, err := http.NewRequestWithContext(b.Context(), "GET", to.hs.URL+"/v1/sessions/"+sess.ID+"/events/stream", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+to.apiKey)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		b.Fatalf("open the stream: %v %v", res, err)
	}
	defer res.Body.Close()
	type arrival struct {
		id string
		at time.Time
	}
	arrived := make(chan arrival, 64)
	go func() {
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var e api.Event
			if json.Unmarshal([]byte(data), &e) == nil {
				arrived <- arrival{e.ID, time.Now()}
			}
		}
		close(arrived)
	}()

	// An empty script: the agent answers each message at once and needs
	// no worker. The message's own event is timed, from the moment its
	// request is sent to the moment the stream delivers it (which may be
	// before the request returns: the response waits for the agent).
	msg := map[string]any{"events": []api.Event{api.UserMessage(`{"tool_calls":[]}`)}}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		var sent api.SendEventsResponse
		from.must(200, "POST", "/v1/sessions/"+sess.ID+"/events", from.apiKey, msg, &sent)
		for a := range arrived {
			if a.id == sent.Data[0].ID {
				lat = append(lat, a.at.Sub(start))
				break
			}
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.95), "p95-ms")
	b.Logf("%s → %s: %d events, p50 %.2f ms, p95 %.2f ms", from.hs.URL, to.hs.URL, len(lat), ms(0.50), ms(0.95))
}
