package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/secret"
	"github.com/memstore/memstore/internal/storage"
)

// MinPasswordChars is the shortest password a user may set.
const MinPasswordChars = 10

// Users manages the people who sign in to the console, and their
// sign-ins. The command line uses it without a server (NewUsers over the
// database), the console through App.Users.
type Users struct {
	store storage.Users
	log   *slog.Logger
	now   func() time.Time
	// unknownUserHash is checked against when a sign-in names no user, so
	// that the answer's timing does not tell which names exist. It is made
	// at the first such sign-in: the command line never needs it.
	unknownUserHash func() string
}

// NewUsers returns the users service over store; log and now may be nil.
func NewUsers(store storage.Users, log *slog.Logger, now func() time.Time) *Users {
	if log == nil {
		log = slog.Default()
	}
	if now == nil {
		now = time.Now
	}
	unknown := sync.OnceValue(func() string {
		hash, err := secret.HashPassword(secret.GeneratePassword())
		if err != nil {
			panic("crypto/rand failed: " + err.Error())
		}
		return hash
	})
	return &Users{store: store, log: log, now: now, unknownUserHash: unknown}
}

// CheckUserName refuses a user name that could not be typed at the login
// form or read in a listing: 1–64 characters, no spaces or control
// characters.
func CheckUserName(name string) error {
	n := utf8.RuneCountInString(name)
	if n == 0 || n > 64 || !utf8.ValidString(name) {
		return fmt.Errorf("user name %q: must be 1 to 64 characters", name)
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("user name %q: spaces, control and format characters are not allowed; use letters, digits, '.', '-' or '_'", name)
		}
	}
	return nil
}

// CheckPassword refuses a password too short to resist guessing.
func CheckPassword(password string) error {
	if utf8.RuneCountInString(password) < MinPasswordChars {
		return fmt.Errorf("password: must be at least %d characters; a few unrelated words make a good one", MinPasswordChars)
	}
	return nil
}

// Create adds a user with a checked name and password.
func (us *Users) Create(ctx context.Context, name, password string) (storage.User, error) {
	if err := firstError(CheckUserName(name), CheckPassword(password)); err != nil {
		return storage.User{}, err
	}
	hash, err := secret.HashPassword(password)
	if err != nil {
		return storage.User{}, err
	}
	u := storage.User{ID: ids.New(ids.User), Name: name, PasswordHash: hash}
	if err := us.store.CreateUser(ctx, u); err != nil {
		if errors.Is(err, storage.ErrUserExists) {
			return storage.User{}, fmt.Errorf("user %q already exists; choose another name, or change their password with `memstore user passwd %s`", name, name)
		}
		return storage.User{}, err
	}
	return u, nil
}

// SetPassword changes a user's password, which signs them out everywhere.
func (us *Users) SetPassword(ctx context.Context, name, password string) error {
	if err := CheckPassword(password); err != nil {
		return err
	}
	u, err := us.named(ctx, name)
	if err != nil {
		return err
	}
	hash, err := secret.HashPassword(password)
	if err != nil {
		return err
	}
	return us.store.SetUserPassword(ctx, u.ID, hash)
}

// Delete removes a user; their open console pages stop working at the
// next request.
func (us *Users) Delete(ctx context.Context, name string) error {
	u, err := us.named(ctx, name)
	if err != nil {
		return err
	}
	return us.store.DeleteUser(ctx, u.ID)
}

func (us *Users) named(ctx context.Context, name string) (storage.User, error) {
	u, err := us.store.UserByName(ctx, name)
	if errors.Is(err, storage.ErrNotFound) {
		return u, fmt.Errorf("no user named %q; `memstore user list` lists them", name)
	}
	return u, err
}

// ErrWrongPassword refuses a sign-in whose name or password is wrong,
// without saying which.
var ErrWrongPassword = errors.New("wrong name or password")

// SignIn checks a name and password and starts a sign-in that lasts ttl.
// It returns the user and the secret for the browser's cookie (stored
// only hashed), or ErrWrongPassword.
func (us *Users) SignIn(ctx context.Context, name, password string, ttl time.Duration) (storage.User, string, error) {
	u, err := us.store.UserByName(ctx, name)
	ok := false
	if err == nil {
		ok, err = secret.PasswordMatches(u.PasswordHash, password)
	} else if errors.Is(err, storage.ErrNotFound) {
		// The same work as for a real user.
		_, err = secret.PasswordMatches(us.unknownUserHash(), password)
	}
	if err != nil {
		us.log.ErrorContext(ctx, "console sign-in failed", "user", name, "error", err)
	}
	if !ok {
		return storage.User{}, "", ErrWrongPassword
	}
	cookie := secret.New("")
	now := us.now().UTC()
	cs := storage.ConsoleSession{ID: ids.New(ids.ConsoleSession), UserID: u.ID, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if err := us.store.CreateConsoleSession(ctx, cs, secret.Hash(cookie)); err != nil {
		return storage.User{}, "", err
	}
	us.log.InfoContext(ctx, "console sign-in", "user_id", u.ID, "user", u.Name)
	return u, cookie, nil
}

// SignedIn returns the user of a live sign-in, by its cookie's secret;
// storage.ErrNotFound when it expired or was ended.
func (us *Users) SignedIn(ctx context.Context, cookie string) (storage.User, error) {
	_, u, err := us.store.ConsoleSessionByHash(ctx, secret.Hash(cookie))
	return u, err
}

// SignOut ends a sign-in; ending an unknown one is not an error.
func (us *Users) SignOut(ctx context.Context, cookie string) error {
	return us.store.DeleteConsoleSession(ctx, secret.Hash(cookie))
}
