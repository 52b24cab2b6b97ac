package memsync_test

import (
	"flag"
	"os"
	"strconv"
	"testing"

	"github.com/memstore/memstore/internal/testenv"
)

// TestMain sets how many cases each rapid property tries. The model tests
// run a real Session against a real server for every case, about 0.2 s each
// under -race, so rapid's default of 100 would cost half a minute in the
// README's test command; the long run searches ten times deeper. A
// -rapid.checks on the command line still wins (flags are parsed in m.Run).
func TestMain(m *testing.M) {
	if err := flag.Set("rapid.checks", strconv.Itoa(testenv.Scale(25, 1000))); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}
