package storagetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
)

func testUsers(t *testing.T, open Factory) {
	ctx := context.Background()
	clock := newClock()
	s := open(t, clock.Now)
	t.Cleanup(func() { s.Close() })

	ada := storage.User{ID: ids.New(ids.User), Name: "ada", PasswordHash: "h1"}
	if err := s.CreateUser(ctx, ada); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateUser(ctx, storage.User{ID: ids.New(ids.User), Name: "ada", PasswordHash: "h2"}); !errors.Is(err, storage.ErrUserExists) {
		t.Fatalf("second user named ada: err = %v, want ErrUserExists", err)
	}
	bob := storage.User{ID: ids.New(ids.User), Name: "bob", PasswordHash: "h3"}
	if err := s.CreateUser(ctx, bob); err != nil {
		t.Fatal(err)
	}
	users, err := s.ListUsers(ctx)
	if err != nil || len(users) != 2 || users[0].Name != "ada" || users[1].Name != "bob" {
		t.Fatalf("ListUsers = %+v, %v; want ada then bob (the refused duplicate not stored)", users, err)
	}
	got, err := s.UserByName(ctx, "ada")
	if err != nil || got.ID != ada.ID || got.PasswordHash != "h1" || !got.CreatedAt.Equal(clock.Now()) {
		t.Fatalf("UserByName(ada) = %+v, %v", got, err)
	}
	if _, err := s.UserByName(ctx, "nobody"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("UserByName(nobody): err = %v, want ErrNotFound", err)
	}
	if got, err := s.UserByID(ctx, bob.ID); err != nil || got.Name != "bob" || got.PasswordHash != "h3" {
		t.Fatalf("UserByID(%s) = %+v, %v; want bob", bob.ID, got, err)
	}
	if _, err := s.UserByID(ctx, ids.New(ids.User)); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("UserByID(unknown): err = %v, want ErrNotFound", err)
	}

	session := func(u storage.User, hash string) {
		t.Helper()
		cs := storage.ConsoleSession{ID: ids.New(ids.ConsoleSession), UserID: u.ID, ExpiresAt: clock.Now().Add(time.Hour)}
		if err := s.CreateConsoleSession(ctx, cs, hash); err != nil {
			t.Fatal(err)
		}
	}
	live := func(hash string) bool {
		t.Helper()
		_, _, err := s.ConsoleSessionByHash(ctx, hash)
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	session(ada, "s-ada-1")
	session(ada, "s-ada-2")
	session(bob, "s-bob")
	cs, u, err := s.ConsoleSessionByHash(ctx, "s-ada-1")
	if err != nil || u.ID != ada.ID || u.Name != "ada" || cs.UserID != ada.ID {
		t.Fatalf("ConsoleSessionByHash = %+v, %+v, %v", cs, u, err)
	}

	// Logout ends one browser only.
	if err := s.DeleteConsoleSession(ctx, "s-ada-1"); err != nil {
		t.Fatal(err)
	}
	if live("s-ada-1") || !live("s-ada-2") {
		t.Fatal("logout must end that session and keep the user's others")
	}
	// A new password ends every session of that user, not of others.
	if err := s.SetUserPassword(ctx, ada.ID, "h9"); err != nil {
		t.Fatal(err)
	}
	if live("s-ada-2") || !live("s-bob") {
		t.Fatal("a password change must end the user's sessions and only theirs")
	}
	if got, _ := s.UserByName(ctx, "ada"); got.PasswordHash != "h9" {
		t.Fatalf("password hash = %q after SetUserPassword, want h9", got.PasswordHash)
	}
	// Sessions expire by the store's clock.
	clock.Advance(time.Hour)
	if live("s-bob") {
		t.Fatal("a session past its expiry is still live")
	}
	// Deleting a user ends their sessions at once.
	clock.Advance(-time.Hour)
	session(bob, "s-bob-2")
	if err := s.DeleteUser(ctx, bob.ID); err != nil {
		t.Fatal(err)
	}
	if live("s-bob-2") {
		t.Fatal("a deleted user's session is still live")
	}
	if err := s.DeleteUser(ctx, bob.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("deleting a deleted user: err = %v, want ErrNotFound", err)
	}
	if err := s.SetUserPassword(ctx, bob.ID, "x"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("password of a deleted user: err = %v, want ErrNotFound", err)
	}
}

func testMemoryStoreUsage(t *testing.T, open Factory) {
	f := newFixture(t, open)
	st := f.store("usage")
	usage := func(prefix string) storage.StoreUsage {
		t.Helper()
		u, err := f.s.MemoryStoreUsage(f.ctx, st.ID, prefix)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	if u := usage("/"); u.Memories != 0 || u.Bytes != 0 || u.LastChange != nil {
		t.Fatalf("usage of an empty store = %+v, want zero and no last change", u)
	}
	f.create(st.ID, "/a.md", "12345")
	f.clock.Advance(time.Minute)
	m := f.create(st.ID, "/dir/b.md", "123")
	f.create(st.ID, "/dir0.md", "1") // byte-wise just past the folder /dir/
	if u := usage("/"); u.Memories != 3 || u.Bytes != 9 || u.LastChange == nil || !u.LastChange.Equal(f.clock.Now()) {
		t.Fatalf("usage = %+v, want 3 memories, 9 bytes, last change now", u)
	}
	if u := usage("/dir/"); u.Memories != 1 || u.Bytes != 3 {
		t.Fatalf("usage of /dir/ = %+v, want only /dir/b.md", u)
	}
	f.clock.Advance(time.Minute)
	if err := f.s.DeleteMemory(f.ctx, st.ID, m.ID, "", apiActor); err != nil {
		t.Fatal(err)
	}
	if u := usage("/dir/"); u.Memories != 0 || u.Bytes != 0 || u.LastChange != nil {
		t.Fatalf("usage of an emptied folder = %+v, want zero", u)
	}
	if _, err := f.s.MemoryStoreUsage(f.ctx, "memstore_nope", "/"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("usage of a missing store: err = %v, want ErrNotFound", err)
	}
}
