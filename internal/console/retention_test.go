package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/retention"
	"github.com/memstore/memstore/internal/testserver"
)

// The store's settings page says which versions the store keeps: the
// server's default until the store has a policy of its own.
func TestSettingsShowVersionRetention(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Console: true, Configure: func(c *app.Config) {
		c.DefaultRetention = retention.Policy{MaxAge: 720 * time.Hour}
	}})
	if _, err := app.NewUsers(srv.Store, nil, nil).Create(context.Background(), "ada", testPassword); err != nil {
		t.Fatal(err)
	}
	admin := srv.Admin(t)
	st, err := admin.CreateMemoryStore(context.Background(), api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	v := newVisitor(t, srv)
	v.login("ada", testPassword)
	path := "/console/stores/" + st.ID + "/settings"
	if _, page := v.do("GET", path, nil); !strings.Contains(page, "versions younger than 720h0m0s") || !strings.Contains(page, ", the server's default") {
		t.Fatalf("settings do not show the server's default retention:\n%s", page)
	}
	if _, err := admin.UpdateMemoryStore(context.Background(), st.ID, api.UpdateMemoryStoreRequest{VersionRetention: &api.VersionRetention{Type: api.RetentionKeepLast, KeepLast: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, page := v.do("GET", path, nil); !strings.Contains(page, "the newest 2 versions of each memory") || strings.Contains(page, ", the server's default") {
		t.Fatalf("settings do not show the store's keep_last=2:\n%s", page)
	}
}
