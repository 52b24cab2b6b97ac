// Package testdigest computes, for tests, the digests the API shows (a
// memory's content_sha256, a precondition), apart from the code under
// test: an expected value made by the function being checked would check
// nothing.
package testdigest

import (
	"crypto/sha256"
	"encoding/hex"
)

// SHA256 is the lowercase hex SHA-256 of s, as content_sha256 spells it.
func SHA256(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
