package memsync_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memstore/memstore/memsync"
)

// BenchmarkBashWriteToServer measures how long a file written by bash
// (no Wrote) takes to reach the server in live mode, as p50 and p95 over
// the iterations: "periodic" with the folder's watch off (the interval
// scan alone, 5 s, queued by a tool call every 500 ms, as before the
// watch), "watch" with it on. Run with a small -benchtime, e.g. 10x: each
// periodic iteration takes seconds.
func BenchmarkBashWriteToServer(b *testing.B) {
	for _, c := range []struct {
		name  string
		quiet time.Duration
	}{{"periodic", -1}, {"watch", 0}} {
		b.Run(c.name, func(b *testing.B) {
			e := newFeedEnv(b)
			realClock := func(cfg *memsync.SessionConfig, _ *memsync.StoreMount) { cfg.Now = time.Now }
			watch := func(cfg *memsync.SessionConfig, _ *memsync.StoreMount) { cfg.WatchQuiet = c.quiet }
			m := e.mount(b.TempDir(), interval(memsync.MinInterval), realClock, watch)
			m.StartLive(e.ctx)
			defer m.End(e.ctx, false)
			stop := make(chan struct{})
			defer close(stop)
			go func() { // the agent's tool calls
				t := time.NewTicker(500 * time.Millisecond)
				defer t.Stop()
				for {
					select {
					case <-stop:
						return
					case <-t.C:
						m.Nudge(e.ctx)
					}
				}
			}()
			var took []time.Duration
			for i := 0; b.Loop(); i++ {
				// A random phase against the interval, as a real change has.
				time.Sleep(time.Duration(i*337%1000) * time.Millisecond)
				want := fmt.Sprintf("run %d", i)
				start := time.Now()
				writeFile(b, m.dir, "bash.md", want)
				for e.server()["/bash.md"] != want {
					if time.Since(start) > time.Minute {
						b.Fatalf("the change never reached the server")
					}
					time.Sleep(10 * time.Millisecond)
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			p := func(q float64) float64 {
				return float64(took[int(q*float64(len(took)-1)+0.5)].Milliseconds())
			}
			b.ReportMetric(p(0.5), "p50-ms")
			b.ReportMetric(p(0.95), "p95-ms")
			b.Logf("%s: change → server p50 %.0f ms, p95 %.0f ms over %d changes", c.name, p(0.5), p(0.95), len(took))
		})
	}
}
