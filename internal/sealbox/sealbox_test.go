package sealbox

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A sealed secret opens with its key and its row, and with nothing else;
// its bytes do not contain the plaintext.
func TestSealOpensOnlyWithItsKeyAndContext(t *testing.T) {
	key, gen, err := KeyFile(filepath.Join(t.TempDir(), "secrets.key"))
	if err != nil || !gen {
		t.Fatal(gen, err)
	}
	b, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	sealed := b.Seal([]byte("tok-123456"), "vcrd_1")
	if bytes.Contains(sealed, []byte("tok-123456")) {
		t.Fatal("the sealed bytes hold the plaintext")
	}
	if out, err := b.Open(sealed, "vcrd_1"); err != nil || string(out) != "tok-123456" {
		t.Fatalf("open: %q %v", out, err)
	}
	if _, err := b.Open(sealed, "vcrd_2"); !errors.Is(err, ErrOpen) {
		t.Fatalf("opened under another row: %v", err)
	}
	other, _ := New(bytes.Repeat([]byte{1}, KeySize))
	if _, err := other.Open(sealed, "vcrd_1"); !errors.Is(err, ErrOpen) {
		t.Fatalf("opened with another key: %v", err)
	}
}

// The key file is made once, private, and read back the same.
func TestKeyFileIsMadeOnceAndKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets.key")
	k1, gen, err := KeyFile(path)
	if err != nil || !gen {
		t.Fatal(gen, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	k2, gen, err := KeyFile(path)
	if err != nil || gen || !bytes.Equal(k1, k2) {
		t.Fatalf("second read: generated %v, same %v, %v", gen, bytes.Equal(k1, k2), err)
	}
	os.WriteFile(path, []byte("c2hvcnQ=\n"), 0o600)
	if _, _, err := KeyFile(path); err == nil {
		t.Fatal("a short key was accepted")
	}
	if _, err := New(make([]byte, 16)); err == nil {
		t.Fatal("a 16-byte key was accepted")
	}
}
