//go:build !race

package console_test

// junkNames is how many junk names the sign-in flood sends (issue 25's
// figure).
const junkNames = 100_000
