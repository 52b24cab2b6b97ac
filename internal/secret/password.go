package secret

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Password hashing: Argon2id, memory-hard, with the parameters OWASP
// recommends as a floor (19 MiB, 2 passes, 1 lane). The parameters are
// stored with each hash, so raising them later keeps old passwords
// working.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024
	argonThreads = 1
	argonKeyLen  = 32
)

// HashPassword returns the encoded Argon2id hash of password.
func HashPassword(password string) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// PasswordMatches reports whether password matches the encoded hash.
func PasswordMatches(encoded, password string) (bool, error) {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, errors.New("stored password hash is not an argon2id hash")
	}
	var (
		version       int
		mem, passes   uint32
		threads       uint8
		salt, want    []byte
		errVer, errPr error
	)
	_, errVer = fmt.Sscanf(parts[2], "v=%d", &version)
	_, errPr = fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &mem, &passes, &threads)
	if errVer != nil || errPr != nil || version != argon2.Version {
		return false, fmt.Errorf("stored password hash has unreadable parameters %q", parts[2]+"$"+parts[3])
	}
	var err error
	if salt, err = base64.RawStdEncoding.DecodeString(parts[4]); err != nil {
		return false, fmt.Errorf("stored password hash has a bad salt: %w", err)
	}
	if want, err = base64.RawStdEncoding.DecodeString(parts[5]); err != nil {
		return false, fmt.Errorf("stored password hash has a bad key: %w", err)
	}
	got := argon2.IDKey([]byte(password), salt, passes, mem, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// GeneratePassword returns a random password of 20 URL-safe characters
// (120 bits), for a user made without one.
func GeneratePassword() string {
	b := make([]byte, 15)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
