//go:build memstore_faults

package workercli

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/memstore/memstore/internal/faultstop"
)

// faultVar selects where a fault-injection build stops: "<point>#<n>", the
// n-th time the worker reaches point (worker.Config.FaultPoint).
const faultVar = "MEMSTORE_FAULT_AT"

// FaultPoint returns, when MEMSTORE_FAULT_AT is set, a hook that logs and
// then stops the whole process (SIGSTOP) at the chosen moment, before the
// code after the point runs (faultstop.Stop). The test that set it sees
// the process stopped and decides what dies there: the worker (SIGKILL),
// the server (and the worker goes on, SIGCONT), or both.
func FaultPoint(log *slog.Logger) func(string) {
	spec := os.Getenv(faultVar)
	if spec == "" {
		return nil
	}
	point, nth, _ := strings.Cut(spec, "#")
	n, err := strconv.Atoi(nth)
	if err != nil || n < 1 {
		panic(fmt.Sprintf("%s=%q: want <point>#<n>, n at least 1", faultVar, spec))
	}
	var mu sync.Mutex
	seen := 0
	return func(p string) {
		if p != point {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if seen++; seen != n {
			return
		}
		log.Warn("fault point reached; stopping the process", "point", p, "hit", n)
		faultstop.Stop()
	}
}
