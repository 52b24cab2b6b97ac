// Package sealbox encrypts the secrets memstore must give back to someone
// else later — a vault's bearer token, sent to an MCP server — as opposed
// to the ones it only checks (internal/secret, which keeps a hash). It is
// AES-256-GCM under one key the operator owns: a copy of the database, a
// backup or a look at its file shows ciphertext only.
package sealbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
)

// KeySize is the key's length in bytes (AES-256).
const KeySize = 32

// Box seals and opens with one key.
type Box struct{ aead cipher.AEAD }

// New returns the Box of a KeySize-byte key.
func New(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("the secrets key has %d bytes; it must have %d (base64 of 32 random bytes, e.g. from `openssl rand -base64 32`)", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead}, nil
}

// Seal encrypts plaintext, bound to context (the row it belongs to, so a
// ciphertext copied to another row does not open there). The result is the
// nonce followed by the ciphertext.
func (b *Box) Seal(plaintext []byte, context string) []byte {
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(plaintext)+b.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return b.aead.Seal(nonce, nonce, plaintext, []byte(context))
}

// ErrOpen is a sealed value that does not open: another key, another
// row's, or damaged.
var ErrOpen = errors.New("sealbox: the secret does not decrypt with this server's secrets key (was the key changed?)")

// Open decrypts what Seal made with the same context.
func (b *Box) Open(sealed []byte, context string) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n {
		return nil, ErrOpen
	}
	out, err := b.aead.Open(nil, sealed[:n], sealed[n:], []byte(context))
	if err != nil {
		return nil, ErrOpen
	}
	return out, nil
}

// ParseKey reads a key written as base64 (standard or URL alphabet,
// padded or not), as KeyFile writes it.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil {
			if len(k) != KeySize {
				return nil, fmt.Errorf("the secrets key decodes to %d bytes; it must be %d (base64 of 32 random bytes, e.g. from `openssl rand -base64 32`)", len(k), KeySize)
			}
			return k, nil
		}
	}
	return nil, errors.New("the secrets key is not base64; give base64 of 32 random bytes (e.g. from `openssl rand -base64 32`)")
}

// KeyFile reads the key kept at path, or, when there is no file, makes a
// random one and writes it there (mode 0600). generated says which.
func KeyFile(path string) (key []byte, generated bool, err error) {
	raw, err := os.ReadFile(path)
	if err == nil {
		k, err := ParseKey(string(raw))
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", path, err)
		}
		return k, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, false, err
	}
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("write the secrets key to %s: %w", path, err)
	}
	if _, err := f.WriteString(base64.StdEncoding.EncodeToString(k) + "\n"); err != nil {
		f.Close()
		return nil, false, err
	}
	return k, true, f.Close()
}
