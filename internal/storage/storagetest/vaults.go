package storagetest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
)

// Vaults keep their credentials' sealed secrets apart from the public
// form, find the live one for a URL among a session's vaults, and go with
// their credentials when deleted.
func testVaults(t *testing.T, open Factory) {
	ctx := context.Background()
	clock := newClock()
	s := open(t, clock.Now)
	t.Cleanup(func() { s.Close() })

	now := clock.Now()
	mk := func(name string) api.Vault {
		v := api.Vault{ID: ids.New(ids.Vault), Type: "vault", DisplayName: name, Metadata: map[string]string{}, CreatedAt: now, UpdatedAt: now}
		if err := s.CreateVault(ctx, v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	a, b := mk("a"), mk("b")
	const url = "https://mcp.example.com/mcp"
	cred := func(v api.Vault, url string, secret []byte) api.VaultCredential {
		c := api.VaultCredential{ID: ids.New(ids.VaultCredential), Type: "vault_credential", VaultID: v.ID, Metadata: map[string]string{},
			Auth: api.CredentialAuth{Type: api.CredentialStaticBearer, MCPServerURL: url}, CreatedAt: now, UpdatedAt: now}
		if err := s.CreateVaultCredential(ctx, c, secret); err != nil {
			t.Fatal(err)
		}
		return c
	}
	ca := cred(a, url, []byte{1, 2, 0, 3})
	cb := cred(b, url, []byte{9})
	cred(b, "https://other.example.com", []byte{8})

	got, err := s.VaultSecrets(ctx, []string{a.ID, b.ID}, api.CredentialStaticBearer, url)
	if err != nil || len(got) != 2 {
		t.Fatalf("VaultSecrets = %+v, %v; want the two credentials for %s", got, err, url)
	}
	for _, g := range got {
		if g.CredentialID == ca.ID && (g.VaultID != a.ID || !bytes.Equal(g.Sealed, []byte{1, 2, 0, 3})) {
			t.Fatalf("the secret of %s came back as %+v", ca.ID, g)
		}
	}
	if got, _ := s.VaultSecrets(ctx, []string{b.ID}, "mcp_oauth", url); len(got) != 0 {
		t.Fatalf("another type's secrets: %+v", got)
	}

	// Archiving a credential (and forgetting its secret) hides it.
	if _, err := s.UpdateVaultCredential(ctx, b.ID, cb.ID, func(c *api.VaultCredential) ([]byte, error) {
		c.ArchivedAt = &now
		return []byte{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.VaultSecrets(ctx, []string{b.ID}, api.CredentialStaticBearer, url); len(got) != 0 {
		t.Fatalf("an archived credential's secret: %+v", got)
	}
	if list, err := s.ListVaultCredentials(ctx, b.ID, storage.ListQuery{}); err != nil || len(list) != 1 {
		t.Fatalf("live credentials of b = %d, %v; want 1", len(list), err)
	}
	if list, _ := s.ListVaultCredentials(ctx, b.ID, storage.ListQuery{IncludeArchived: true}); len(list) != 2 {
		t.Fatalf("all credentials of b = %d; want 2", len(list))
	}

	// An archived vault gives no secrets.
	if _, err := s.UpdateVault(ctx, a.ID, func(v *api.Vault) error { v.ArchivedAt = &now; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.VaultSecrets(ctx, []string{a.ID}, api.CredentialStaticBearer, url); len(got) != 0 {
		t.Fatalf("an archived vault's secrets: %+v", got)
	}
	if list, _ := s.ListVaults(ctx, storage.ListQuery{}); len(list) != 1 || list[0].ID != b.ID {
		t.Fatalf("live vaults = %+v; want b", list)
	}

	// Deleting a vault deletes its credentials; a missing one is ErrNotFound.
	if err := s.DeleteVault(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetVaultCredential(ctx, a.ID, ca.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a deleted vault's credential: %v", err)
	}
	if err := s.CreateVaultCredential(ctx, api.VaultCredential{ID: ids.New(ids.VaultCredential), VaultID: a.ID, Auth: api.CredentialAuth{Type: api.CredentialStaticBearer, MCPServerURL: url}, CreatedAt: now, UpdatedAt: now}, []byte{1}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a credential in a deleted vault: %v", err)
	}
	if _, err := s.ListVaultCredentials(ctx, a.ID, storage.ListQuery{}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the credentials of a deleted vault: %v", err)
	}
}
