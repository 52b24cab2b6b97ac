// Package ids makes the object ids of the wire contract: a type prefix
// ("mem_", "sesn_", …) and a random body that sorts by creation time, so
// ids double as stable, roughly chronological pagination keys.
package ids

import (
	"crypto/rand"
	"encoding/binary"
	"strings"
	"sync"
	"time"
)

// Prefixes of every object id.
const (
	MemoryStore     = "memstore_"
	Memory          = "mem_"
	MemoryVersion   = "memver_"
	Environment     = "env_"
	EnvironmentKey  = "envkey_"
	Work            = "work_"
	Session         = "sesn_"
	Agent           = "agent_"
	Event           = "sevt_"
	Resource        = "sesrsc_"
	APIKey          = "apikey_"
	SessionsToken   = "sesstok_"
	User            = "user_"
	ConsoleSession  = "csess_"
	Webhook         = "whep_"
	WebhookEvent    = "wevt_"
	Skill           = "skill_"
	SkillVersion    = "skillver_"
	Vault           = "vlt_"
	VaultCredential = "vcrd_"
)

// Crockford's base32: sortable as ASCII, no ambiguous letters.
const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// bodyLen is 10 characters of milliseconds + 16 of randomness (80 bits), as
// in a ULID.
const bodyLen = 26

var (
	mu       sync.Mutex
	lastMS   uint64
	lastRand [10]byte
)

// New returns prefix + a 26-character body: 48 bits of Unix milliseconds then
// 80 random bits. Within one millisecond the random part is incremented, so
// ids made by this process are strictly increasing.
func New(prefix string) string {
	return NewAt(prefix, time.Now())
}

// NewAt is New with the timestamp supplied, for injected clocks.
func NewAt(prefix string, t time.Time) string {
	ms := uint64(t.UnixMilli())
	mu.Lock()
	var r [10]byte
	if ms <= lastMS {
		ms = lastMS
		r = lastRand
		for i := len(r) - 1; i >= 0; i-- {
			r[i]++
			if r[i] != 0 {
				break
			}
		}
	} else {
		if _, err := rand.Read(r[:]); err != nil {
			panic("ids: crypto/rand failed: " + err.Error())
		}
	}
	lastMS, lastRand = ms, r
	mu.Unlock()

	// 128 bits: 48 of time, 80 of randomness, written as 26 base32 digits
	// (the top 2 bits of the first digit are always zero).
	var b [16]byte
	binary.BigEndian.PutUint16(b[0:2], uint16(ms>>32))
	binary.BigEndian.PutUint32(b[2:6], uint32(ms))
	copy(b[6:], r[:])
	hi := binary.BigEndian.Uint64(b[0:8])
	lo := binary.BigEndian.Uint64(b[8:16])
	var out [bodyLen]byte
	for i := bodyLen - 1; i >= 0; i-- {
		out[i] = alphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return prefix + string(out[:])
}

// Valid reports whether id has the given prefix and a well-formed body. The
// server uses it to answer "wrong kind of id" with a clear 404 before touching
// storage.
func Valid(prefix, id string) bool {
	body, ok := strings.CutPrefix(id, prefix)
	if !ok || len(body) != bodyLen {
		return false
	}
	for i := 0; i < len(body); i++ {
		if !strings.ContainsRune(alphabet, rune(body[i])) {
			return false
		}
	}
	return true
}
