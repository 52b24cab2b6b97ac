// Package secret makes and stores the secrets memstore hands out: API
// keys, environment keys, sessions tokens, console cookies (random, stored
// as a fast hash) and console passwords (chosen by people, stored as a
// slow Argon2id hash). It is a package of its own because the API, the
// console and the command line all mint or check them, and none of those
// should import another to do it.
package secret

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
)

// Hash is how every random secret is stored: lowercase hex SHA-256. The
// secrets are long random strings, so a fast hash is enough.
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// New returns a fresh random secret with a readable prefix
// ("sk-memstore-", …) so a leaked one can be recognised.
func New(prefix string) string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}
