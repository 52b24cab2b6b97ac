package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/testserver"
)

// userReads is a real store that counts the reads of console users.
type userReads struct {
	storage.Store
	lists, byID atomic.Int32
}

func (u *userReads) ListUsers(ctx context.Context) ([]storage.User, error) {
	u.lists.Add(1)
	return u.Store.ListUsers(ctx)
}

func (u *userReads) UserByID(ctx context.Context, id string) (storage.User, error) {
	u.byID.Add(1)
	return u.Store.UserByID(ctx, id)
}

// A page reads the console users it names, each once, and no other: with
// many users, the list of stores reads none, and a folder whose memories
// were written by one user and by a deleted one reads two.
func TestAPageReadsOnlyTheUsersItNames(t *testing.T) {
	reads := &userReads{}
	srv := testserver.Start(t, testserver.Options{Console: true, Configure: func(c *app.Config) { reads.Store = c.Store; c.Store = reads }})
	ctx := context.Background()
	ada, err := app.NewUsers(srv.Store, nil, nil).Create(ctx, "ada", testPassword)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := srv.Store.CreateUser(ctx, storage.User{ID: ids.New(ids.User), Name: fmt.Sprintf("user-%02d", i), PasswordHash: "unused"}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := srv.Store.CreateMemoryStore(ctx, storage.NewMemoryStore{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	gone := ids.New(ids.User)
	for i, by := range []string{ada.ID, ada.ID, ada.ID, gone} {
		if _, err := srv.Store.CreateMemory(ctx, storage.NewMemory{StoreID: st.ID, Path: fmt.Sprintf("/m%d", i), Content: "x",
			By: storage.Actor{Kind: storage.ActorUser, ID: by}, MaxMemories: 10}); err != nil {
			t.Fatal(err)
		}
	}
	v := newVisitor(t, srv)
	v.login("ada", testPassword)
	for _, c := range []struct {
		path  string
		reads int32
		shows []string
	}{
		{"/console/", 0, []string{"notes"}},
		{"/console/stores/" + st.ID + "/", 2, []string{"ada (console)", "user " + gone + " (deleted)"}},
	} {
		reads.lists.Store(0)
		reads.byID.Store(0)
		status, page := v.do("GET", c.path, nil)
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", c.path, status, page)
		}
		for _, s := range c.shows {
			if !strings.Contains(page, s) {
				t.Errorf("GET %s does not show %q", c.path, s)
			}
		}
		if l, n := reads.lists.Load(), reads.byID.Load(); l != 0 || n != c.reads {
			t.Errorf("GET %s read the user list %d times and %d users by id; want 0 and %d", c.path, l, n, c.reads)
		}
	}
}

// The console applies the memory limit the server is configured with, not
// one of its own: a store at the server's limit refuses a console create
// and stores nothing.
func TestTheConsoleKeepsTheServersMemoryLimit(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Console: true, Configure: func(c *app.Config) { c.MaxMemoriesPerStore = 2 }})
	ctx := context.Background()
	if _, err := app.NewUsers(srv.Store, nil, nil).Create(ctx, "ada", testPassword); err != nil {
		t.Fatal(err)
	}
	st, err := srv.Store.CreateMemoryStore(ctx, storage.NewMemoryStore{Name: "small"})
	if err != nil {
		t.Fatal(err)
	}
	v := newVisitor(t, srv)
	v.login("ada", testPassword)
	tree := "/console/stores/" + st.ID + "/"
	for i := range 3 {
		status, page := v.do("POST", tree+"memories", url.Values{"csrf": {v.csrf(tree)}, "path": {fmt.Sprintf("/m%d", i)}, "content": {"x"}})
		want := http.StatusSeeOther
		if i == 2 {
			want = http.StatusConflict
		}
		if status != want || (i == 2 && !strings.Contains(page, "already holds 2 memories")) {
			t.Fatalf("create %d: status %d, want %d:\n%s", i, status, want, page)
		}
	}
	if n, err := srv.Store.CountMemories(ctx, st.ID); err != nil || n != 2 {
		t.Fatalf("the store holds %d memories, %v; want the 2 the limit allows", n, err)
	}
}
