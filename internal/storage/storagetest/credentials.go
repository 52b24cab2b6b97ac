package storagetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/testclock"
)

func testCredentials(t *testing.T, open Factory) {
	ctx := context.Background()
	clock := newClock()
	s := open(t, clock.Now)
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
	if !got.CreatedAt.Equal(clock.Now()) {
		t.Fatalf("CreatedAt = %v, want the store clock %v", got.CreatedAt, clock.Now())
	}
	if _, err := s.CredentialByHash(ctx, "nope"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("unknown hash: err = %v, want ErrNotFound", err)
	}
	if n, _ := s.CountCredentials(ctx, storage.APIKey); n != 1 {
		t.Fatalf("CountCredentials(api_key) = %d, want 1", n)
	}

	testEnvironmentKeys(t, s, clock)
}

// testEnvironmentKeys lists and revokes the keys of one environment, never
// touching another environment's keys or other kinds of credential.
func testEnvironmentKeys(t *testing.T, s storage.Store, clock *testclock.Clock) {
	ctx := context.Background()
	var mine []storage.Credential
	for i, env := range []string{"env_a", "env_b", "env_a", "env_a"} {
		clock.Advance(time.Second)
		c := storage.Credential{ID: ids.NewAt(ids.EnvironmentKey, clock.Now()), Kind: storage.EnvironmentKey, EnvironmentID: env, Name: fmt.Sprint("k", i)}
		if err := s.CreateCredential(ctx, c, fmt.Sprint("env-hash-", i)); err != nil {
			t.Fatal(err)
		}
		if env == "env_a" {
			mine = append(mine, c)
		}
	}
	list := func(q storage.ListQuery) []string {
		t.Helper()
		keys, err := s.ListEnvironmentKeys(ctx, "env_a", q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, k := range keys {
			if k.Kind != storage.EnvironmentKey || k.EnvironmentID != "env_a" || k.CreatedAt.IsZero() {
				t.Fatalf("listed %+v", k)
			}
			out = append(out, k.ID)
		}
		return out
	}
	if got, want := list(storage.ListQuery{}), []string{mine[2].ID, mine[1].ID, mine[0].ID}; !slices.Equal(got, want) {
		t.Fatalf("keys of env_a = %v, want newest first %v", got, want)
	}
	if got := list(storage.ListQuery{After: mine[2].ID, Limit: 1}); !slices.Equal(got, []string{mine[1].ID}) {
		t.Fatalf("second page of one = %v, want %v", got, mine[1].ID)
	}

	if err := s.RevokeEnvironmentKey(ctx, "env_b", mine[1].ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("revoking env_a's key under env_b: err = %v, want ErrNotFound", err)
	}
	if err := s.RevokeEnvironmentKey(ctx, "env_a", mine[1].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CredentialByHash(ctx, "env-hash-2"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a revoked key still authenticates: %v", err)
	}
	if err := s.RevokeEnvironmentKey(ctx, "env_a", mine[1].ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("revoking twice: err = %v, want ErrNotFound", err)
	}
	if got := list(storage.ListQuery{}); !slices.Equal(got, []string{mine[2].ID, mine[0].ID}) {
		t.Fatalf("keys after the revocation = %v", got)
	}
	if _, err := s.CredentialByHash(ctx, "env-hash-1"); err != nil {
		t.Fatalf("env_b's key was touched: %v", err)
	}
	if err := s.RevokeEnvironmentKey(ctx, "env_a", "apikey_x"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("revoking an unknown id: err = %v, want ErrNotFound", err)
	}
}
