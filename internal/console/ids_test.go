package console_test

import (
	"context"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
)

// Ids are shown where a person needs one for the CLI or the API, in a
// <code> one click selects, with a Copy button that stays hidden until the
// script can make it work.
func TestIdsAreShownAndCopyable(t *testing.T) {
	srv := startConsole(t)
	ctx := context.Background()
	admin := srv.Admin(t)
	store, err := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := admin.CreateMemory(ctx, store.ID, api.CreateMemoryRequest{Path: "/a.md", Content: "a"})
	if err != nil {
		t.Fatal(err)
	}
	env, err := admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	v := newVisitor(t, srv)
	v.login("ada", testPassword)
	for page, id := range map[string]string{
		"/console/":                                         store.ID,
		"/console/stores/" + store.ID + "/":                 store.ID,
		"/console/stores/" + store.ID + "/settings":         store.ID,
		"/console/stores/" + store.ID + "/memories/" + m.ID: m.ID,
		"/console/environments":                             env.ID,
		"/console/environments/" + env.ID:                   env.ID,
	} {
		_, body := v.do("GET", page, nil)
		if !strings.Contains(body, `<code class="id">`+id+`</code>`) {
			t.Errorf("%s does not show the id %s in a <code class=\"id\">", page, id)
		}
		if !strings.Contains(body, `<button type="button" class="copy" data-copy="`+id+`" aria-label="copy `+id+`" hidden>Copy</button>`) {
			t.Errorf("%s has no Copy button for %s, hidden until the script shows it", page, id)
		}
	}
}
