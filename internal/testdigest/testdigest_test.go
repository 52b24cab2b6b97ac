package testdigest_test

import (
	"testing"

	"github.com/memstore/memstore/internal/testdigest"
)

// The digest of a known text is the published SHA-256 test vector.
func TestSHA256IsTheHexOfTheDigest(t *testing.T) {
	if got, want := testdigest.SHA256("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Errorf("SHA256(abc) = %s, want %s", got, want)
	}
}
