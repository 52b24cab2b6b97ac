//go:build race

package console_test

// junkNames is how many junk names the sign-in flood sends: under the race
// detector each request costs ten times the CPU, so the flood is a tenth of
// the 100,000 it is elsewhere (still past the 10,000 keys at which the old
// limiter cleared its table).
const junkNames = 10_000
