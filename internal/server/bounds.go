package server

import (
	"math"
	"net/url"
	"strconv"
	"time"
)

// rangeParam reads the whole number query parameter name, def when absent,
// and refuses one outside lo..hi with the range and what the number means.
// The bounds are checked on the number as sent, before it is turned into a
// duration: wait_ms=9223372036854775807 once overflowed into a negative
// wait that passed a check made after the conversion.
func rangeParam(q url.Values, name string, lo, hi, def int64, meaning string) (int64, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, apiErrorf(invalidRequest, "%s: %q is out of range; send a whole number from %d to %d (%s)", name, v, lo, hi, meaning)
	}
	return n, nil
}

// maxDurationMS is the longest duration in milliseconds that time.Duration
// holds (about 292 years): the upper bound of a parameter that has no
// other.
const maxDurationMS = math.MaxInt64 / int64(time.Millisecond)
