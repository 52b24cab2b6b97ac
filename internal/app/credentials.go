package app

import (
	"context"
	"sync"
	"time"

	"github.com/memstore/memstore/internal/secret"
	"github.com/memstore/memstore/internal/storage"
)

// Credentials verifies the secrets API requests carry, through a short
// cache, and forgets what it cached whenever a revocation commits through
// this process (a key revoked, an environment or a session deleted) —
// from the API or the console alike.
type Credentials struct {
	app   *App
	cache credentialCache
}

// Verify returns the live credential whose secret this is, or
// storage.ErrNotFound.
func (c *Credentials) Verify(ctx context.Context, s string) (storage.Credential, error) {
	hash, now := secret.Hash(s), c.app.now()
	cred, ok, generation := c.cache.get(hash, now)
	if ok {
		return cred, nil
	}
	cred, err := c.app.store.CredentialByHash(ctx, hash)
	if err != nil {
		return cred, err
	}
	c.cache.put(hash, cred, now, generation)
	return cred, nil
}

// Revoked forgets every verified credential: call it once a revocation
// has committed (or failed part-way), so the revoked ones are refused from
// the next request on.
func (c *Credentials) Revoked() { c.cache.forget() }

// CredentialTTL is how long Verify trusts a credential it verified
// without reading the database again. It bounds how long a revocation
// made elsewhere — by another server on the same PostgreSQL database —
// takes to reach this one; a revocation through this server (API or
// console) forgets the cache at once.
const CredentialTTL = time.Second

// maxCachedCredentials bounds the cache: a server sees few distinct live
// credentials, and clearing it when full only costs lookups.
const maxCachedCredentials = 4096

// credentialCache remembers verified credentials by secret hash, so that
// a busy client's requests do not each look their credential up (it was
// a tenth of the CPU of a memory write under 8 clients). Only credentials
// that were found are kept: an unknown secret is looked up every time, so
// a key minted on another server works at once.
type credentialCache struct {
	mu      sync.Mutex
	entries map[string]cachedCredential
	// generation counts forgets: a credential read from the database
	// before a revocation committed is not cached after it.
	generation uint64
}

type cachedCredential struct {
	credential storage.Credential
	until      time.Time
}

// get returns the cached credential of hash, if fresh, and otherwise the
// generation to hand put once the database has been read.
func (c *credentialCache) get(hash string, now time.Time) (storage.Credential, bool, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[hash]
	if !ok || !now.Before(e.until) {
		return storage.Credential{}, false, c.generation
	}
	return e.credential, true, c.generation
}

// put caches cred unless a forget came after the get that returned
// generation.
func (c *credentialCache) put(hash string, cred storage.Credential, now time.Time, generation uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if generation != c.generation {
		return
	}
	if c.entries == nil || len(c.entries) >= maxCachedCredentials {
		c.entries = map[string]cachedCredential{}
	}
	c.entries[hash] = cachedCredential{credential: cred, until: now.Add(CredentialTTL)}
}

// forget drops every cached credential; call it once a revocation has
// committed.
func (c *credentialCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = nil
	c.generation++
}
