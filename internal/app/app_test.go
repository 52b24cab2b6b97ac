package app_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/requestid"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/sqlite"
	"github.com/memstore/memstore/internal/testlog"
)

// fixture is an App over a real SQLite file, with its log in a buffer.
type fixture struct {
	t   *testing.T
	ctx context.Context
	app *app.App
	db  storage.Store
	log *testlog.Buffer
}

func newFixture(t *testing.T, cfg app.Config) *fixture {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "memstore.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: context.Background(), db: db, log: &testlog.Buffer{}}
	cfg.Store, cfg.Logger = db, slog.New(slog.NewJSONHandler(f.log, nil))
	f.app = app.New(cfg)
	t.Cleanup(func() {
		f.app.Close()
		db.Close()
	})
	return f
}

// person is a console user as the console names one to the services.
var person = app.Caller{Actor: storage.Actor{Kind: storage.ActorUser, ID: "user_01"}, LogKey: "user_id", LogID: "user_01"}

func (f *fixture) store() storage.MemoryStoreRow {
	f.t.Helper()
	st, err := f.app.MemoryStores.Create(f.ctx, storage.NewMemoryStore{Name: "notes"}, person)
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}

// writes reads memstore_memory_writes_total{op} from the app's registry
// (0 before the first such write).
func (f *fixture) writes(op string) float64 {
	f.t.Helper()
	families, err := f.app.Metrics().Gather()
	if err != nil {
		f.t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != "memstore_memory_writes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" && l.GetValue() == op {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// mustRefuse checks err is a validation refusal of type invalid_request
// whose message names field.
func mustRefuse(t *testing.T, err error, field string) {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Type != api.InvalidRequest || !strings.HasPrefix(ae.Message, field+":") {
		t.Fatalf("err = %v; want an invalid_request naming %s", err, field)
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// A memory write through the services — whichever road calls them — is
// counted, wakes the change feed's waiters on its store (not on another),
// and is logged once naming its caller and the request.
func TestAMemoryWriteCountsWakesAndLogs(t *testing.T) {
	f := newFixture(t, app.Config{})
	st, other := f.store(), f.store()
	wake, otherWake := f.app.Memories.WaitForChange(st.ID), f.app.Memories.WaitForChange(other.ID)
	ctx := requestid.With(f.ctx, "req_abc")
	m, err := f.app.Memories.Create(ctx, st.ID, "/a.md", "one", person)
	if err != nil {
		t.Fatal(err)
	}
	if !closed(wake) || closed(otherWake) {
		t.Fatalf("after a create: store woken %v, other store woken %v; want true, false", closed(wake), closed(otherWake))
	}
	if got := f.writes("create"); got != 1 {
		t.Fatalf("memory writes (create) = %v, want 1", got)
	}
	recs := f.log.Records(t, slog.LevelInfo, "memory created")
	if len(recs) != 1 || recs[0]["user_id"] != "user_01" || recs[0]["request_id"] != "req_abc" || recs[0]["memory_id"] != m.ID {
		t.Fatalf("memory created lines = %v; want one naming user_01, req_abc and %s", recs, m.ID)
	}

	// The same content again changes nothing: no version, no count, no wake.
	wake = f.app.Memories.WaitForChange(st.ID)
	same := "one"
	if _, changed, err := f.app.Memories.Update(f.ctx, st.ID, m.ID, app.MemoryChange{Content: &same}, person); err != nil || changed {
		t.Fatalf("update to the same content: changed %v, err %v; want false, nil", changed, err)
	}
	if closed(wake) || f.writes("update") != 0 {
		t.Fatalf("an update that changed nothing woke the feed (%v) or was counted (%v)", closed(wake), f.writes("update"))
	}
}

// Each refusal the API makes is the services' own, so no road skips it:
// a bad path, a bad hash, a stale hash, a full store. Nothing is written,
// counted or woken.
func TestMemoryRefusalsChangeNothing(t *testing.T) {
	f := newFixture(t, app.Config{MaxMemoriesPerStore: 1})
	st := f.store()
	m, err := f.app.Memories.Create(f.ctx, st.ID, "/a.md", "one", person)
	if err != nil {
		t.Fatal(err)
	}
	wake := f.app.Memories.WaitForChange(st.ID)
	_, err = f.app.Memories.Create(f.ctx, st.ID, "no-slash.md", "x", person)
	mustRefuse(t, err, "path")
	two := "two"
	_, _, err = f.app.Memories.Update(f.ctx, st.ID, m.ID, app.MemoryChange{Content: &two, Expect: app.Expect{Field: "sha", SHA256: "ABC"}}, person)
	mustRefuse(t, err, "sha")
	_, _, err = f.app.Memories.Update(f.ctx, st.ID, m.ID, app.MemoryChange{Content: &two, Expect: app.Expect{Field: "sha", SHA256: strings.Repeat("0", 64)}}, person)
	var stale *storage.PreconditionFailedError
	if !errors.As(err, &stale) {
		t.Fatalf("update against a stale hash: %v; want a PreconditionFailedError", err)
	}
	err = f.app.Memories.Delete(f.ctx, st.ID, m.ID, app.Expect{Field: "sha"}, person)
	mustRefuse(t, err, "sha")
	_, err = f.app.Memories.Create(f.ctx, st.ID, "/b.md", "x", person)
	var full *storage.StoreFullError
	if !errors.As(err, &full) || full.Limit != 1 {
		t.Fatalf("a second memory in a store of limit 1: %v; want a StoreFullError of limit 1", err)
	}

	got, err := f.db.GetMemory(f.ctx, st.ID, m.ID)
	if err != nil || *got.Content != "one" || got.VersionID != m.VersionID {
		t.Fatalf("after the refusals the memory is %+v (%v); want it unchanged", got, err)
	}
	if n, _ := f.db.CountMemories(f.ctx, st.ID); n != 1 {
		t.Fatalf("the store holds %d memories after the refusals, want 1", n)
	}
	if closed(wake) || f.writes("update")+f.writes("delete") != 0 || f.writes("create") != 1 {
		t.Fatalf("refusals woke the feed (%v) or were counted", closed(wake))
	}
}

// Restore writes a past version as new content, creates the memory again
// if it was deleted since, and refuses a version without text.
func TestRestore(t *testing.T) {
	f := newFixture(t, app.Config{})
	st := f.store()
	m, err := f.app.Memories.Create(f.ctx, st.ID, "/a.md", "first", person)
	if err != nil {
		t.Fatal(err)
	}
	first, err := f.db.GetMemoryVersion(f.ctx, st.ID, m.VersionID)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.app.Memories.Delete(f.ctx, st.ID, m.ID, app.Expect{}, person); err != nil {
		t.Fatal(err)
	}
	back, err := f.app.Memories.Restore(f.ctx, st.ID, first, person)
	if err != nil || back.Path != "/a.md" || *back.Content != "first" {
		t.Fatalf("restore of a deleted memory's version = %+v, %v; want /a.md holding first", back, err)
	}
	if f.writes("create") != 2 {
		t.Fatalf("creates counted = %v, want 2 (the restore made the memory again)", f.writes("create"))
	}
	redacted, err := f.app.Memories.RedactVersion(f.ctx, st.ID, first.ID, person)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.app.Memories.Restore(f.ctx, st.ID, redacted, person); !errors.Is(err, app.ErrNoContent) {
		t.Fatalf("restore of a redacted version: %v; want ErrNoContent", err)
	}
}

// A store's name, description and metadata are checked before anything is
// created or changed.
func TestMemoryStoreRefusals(t *testing.T) {
	f := newFixture(t, app.Config{})
	_, err := f.app.MemoryStores.Create(f.ctx, storage.NewMemoryStore{Name: strings.Repeat("n", api.MaxStoreNameChars+1)}, person)
	mustRefuse(t, err, "name")
	page, err := f.db.ListMemoryStores(f.ctx, storage.MemoryStoreQuery{Limit: 10, IncludeArchived: true})
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("stores after a refused create: %d (%v); want none", len(page.Items), err)
	}
	st := f.store()
	empty := ""
	_, err = f.app.MemoryStores.Update(f.ctx, st.ID, storage.MemoryStorePatch{Name: &empty}, person)
	mustRefuse(t, err, "name")
	if got, _ := f.db.GetMemoryStore(f.ctx, st.ID); got.Name != "notes" {
		t.Fatalf("name after a refused update = %q, want notes", got.Name)
	}
}

// A key revoked through the services is refused at once, though Verify
// had cached it: the cache is the services', so the console's revocation
// reaches the API's next request too.
func TestARevokedKeyIsRefusedAtOnce(t *testing.T) {
	f := newFixture(t, app.Config{})
	env := storage.Environment{ID: ids.New(ids.Environment), Name: "e", ConfigType: "self_hosted", Metadata: map[string]string{}, CreatedAt: time.Now(), UpdatedAt: time.Now()}
	if err := f.db.CreateEnvironment(f.ctx, env); err != nil {
		t.Fatal(err)
	}
	_, err := f.app.Environments.MintKey(f.ctx, env.ID, strings.Repeat("k", 300), person)
	mustRefuse(t, err, "name")
	if keys, _ := f.db.ListEnvironmentKeys(f.ctx, env.ID, storage.ListQuery{Limit: 10}); len(keys) != 0 {
		t.Fatalf("a refused mint left %d keys", len(keys))
	}
	k, err := f.app.Environments.MintKey(f.ctx, env.ID, "worker", person)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.app.Credentials.Verify(f.ctx, k.Key); err != nil {
		t.Fatalf("a fresh key does not verify: %v", err)
	}
	if err := f.app.Environments.RevokeKey(f.ctx, env.ID, k.ID, person); err != nil {
		t.Fatal(err)
	}
	if _, err := f.app.Credentials.Verify(f.ctx, k.Key); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a revoked key verifies: %v; want ErrNotFound at once", err)
	}
	if err := f.app.Environments.RevokeKey(f.ctx, env.ID, k.ID, person); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("revoking it again: %v; want ErrNotFound", err)
	}
}

// A webhook endpoint may not point at a private address unless the app
// allows it, and nothing is stored when it is refused.
func TestWebhookEndpointRefusedForAPrivateURL(t *testing.T) {
	f := newFixture(t, app.Config{})
	url, events := "http://127.0.0.1:9/hook", []string{"session.created"}
	_, err := f.app.Webhooks.Create(f.ctx, api.WebhookEndpointParams{URL: &url, EnabledEvents: events}, person)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Type != api.InvalidRequest || !strings.Contains(ae.Message, "127.0.0.1") {
		t.Fatalf("create pointing at loopback: %v; want invalid_request naming the address", err)
	}
	if eps, _ := f.db.ListWebhookEndpoints(f.ctx, storage.ListQuery{}); len(eps) != 0 {
		t.Fatalf("a refused create stored %d endpoints", len(eps))
	}
	allowed := newFixture(t, app.Config{Webhooks: app.WebhooksConfig{AllowPrivate: true}})
	made, err := allowed.app.Webhooks.Create(allowed.ctx, api.WebhookEndpointParams{URL: &url, EnabledEvents: events}, person)
	if err != nil || made.SigningSecret == "" {
		t.Fatalf("create with private addresses allowed: %+v, %v", made, err)
	}
}

// Users: a short password is refused, a wrong one does not sign in, a
// sign-in is found by its cookie until it is ended.
func TestUsersSignInAndOut(t *testing.T) {
	f := newFixture(t, app.Config{})
	users := f.app.Users
	if _, err := users.Create(f.ctx, "ada", "short"); err == nil || !strings.Contains(err.Error(), "at least") {
		t.Fatalf("create with a short password: %v; want a refusal saying how long", err)
	}
	if list, _ := f.db.ListUsers(f.ctx); len(list) != 0 {
		t.Fatalf("a refused create made %d users", len(list))
	}
	ada, err := users.Create(f.ctx, "ada", "a long enough password")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := users.SignIn(f.ctx, "ada", "the wrong password", time.Hour); !errors.Is(err, app.ErrWrongPassword) {
		t.Fatalf("sign-in with a wrong password: %v; want ErrWrongPassword", err)
	}
	if _, _, err := users.SignIn(f.ctx, "nobody", "a long enough password", time.Hour); !errors.Is(err, app.ErrWrongPassword) {
		t.Fatalf("sign-in as nobody: %v; want ErrWrongPassword", err)
	}
	_, cookie, err := users.SignIn(f.ctx, "ada", "a long enough password", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if u, err := users.SignedIn(f.ctx, cookie); err != nil || u.ID != ada.ID {
		t.Fatalf("signed in as %+v (%v); want ada", u, err)
	}
	if err := users.SignOut(f.ctx, cookie); err != nil {
		t.Fatal(err)
	}
	if _, err := users.SignedIn(f.ctx, cookie); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("after sign-out: %v; want ErrNotFound", err)
	}
}
