package storagetest

import (
	"context"
	"errors"
	"testing"

	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
)

func testCredentials(t *testing.T, open Factory) {
	ctx := context.Background()
	clock := newClock()
	s := open(t, clock.now)
	t.Cleanup(func() { s.Close() })

	if n, err := s.CountCredentials(ctx, storage.APIKey); err != nil || n != 0 {
		t.Fatalf("CountCredentials on empty store = %d, %v; want 0, nil", n, err)
	}
	key := storage.Credential{ID: ids.New(ids.APIKey), Kind: storage.APIKey, Name: "admin"}
	if err := s.CreateCredential(ctx, key, "hash-a"); err != nil {
		t.Fatal(err)
	}
	tok := storage.Credential{ID: ids.New(ids.APIKey), Kind: storage.SessionsToken, SessionID: "sesn_1", WorkID: "work_1"}
	if err := s.CreateCredential(ctx, tok, "hash-b"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateCredential(ctx, storage.Credential{ID: ids.New(ids.APIKey), Kind: storage.APIKey}, "hash-a"); err == nil {
		t.Fatal("a second credential with the same hash was accepted")
	}

	got, err := s.CredentialByHash(ctx, "hash-b")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != tok.ID || got.Kind != storage.SessionsToken || got.SessionID != "sesn_1" || got.WorkID != "work_1" || got.EnvironmentID != "" {
		t.Fatalf("CredentialByHash = %+v, want %+v", got, tok)
	}
	if !got.CreatedAt.Equal(clock.now()) {
		t.Fatalf("CreatedAt = %v, want the store clock %v", got.CreatedAt, clock.now())
	}
	if _, err := s.CredentialByHash(ctx, "nope"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("unknown hash: err = %v, want ErrNotFound", err)
	}
	if n, _ := s.CountCredentials(ctx, storage.APIKey); n != 1 {
		t.Fatalf("CountCredentials(api_key) = %d, want 1", n)
	}
}
