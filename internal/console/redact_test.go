package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

// Redact is a two-step action: the history links to a confirmation page
// that shows the text to be erased, and only its form (confirm=yes)
// redacts. A POST without it, or any request about the current version,
// changes nothing and says why.
func TestRedactAsksFirstAndIsNeverOfferedOnTheCurrentVersion(t *testing.T) {
	srv := startConsole(t)
	ctx := context.Background()
	admin := srv.Admin(t)
	store, err := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := admin.CreateMemory(ctx, store.ID, api.CreateMemoryRequest{Path: "/secret.md", Content: "the old password"})
	if err != nil {
		t.Fatal(err)
	}
	old := m.MemoryVersionID
	newer := "no secrets here"
	if m, err = admin.UpdateMemory(ctx, store.ID, m.ID, api.UpdateMemoryRequest{Content: &newer}); err != nil {
		t.Fatal(err)
	}
	head := m.MemoryVersionID
	v := newVisitor(t, srv)
	v.login("ada", testPassword)
	base := "/console/stores/" + store.ID
	redacted := func(id string) bool {
		t.Helper()
		got, err := admin.GetMemoryVersion(ctx, store.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		return got.RedactedAt != nil
	}

	_, history := v.do("GET", base+"/memories/"+m.ID+"/history", nil)
	if !strings.Contains(history, `href="`+base+`/versions/`+old+`/redact"`) {
		t.Fatalf("the history does not offer to redact the old version:\n%s", history)
	}
	if strings.Contains(history, "/versions/"+head+"/redact") {
		t.Fatalf("the history offers to redact the current version, which always fails:\n%s", history)
	}
	_, version := v.do("GET", base+"/versions/"+head, nil)
	if strings.Contains(version, "/redact") {
		t.Fatalf("the current version's page offers Redact:\n%s", version)
	}

	status, page := v.do("GET", base+"/versions/"+old+"/redact", nil)
	if status != http.StatusOK || !strings.Contains(page, "the old password") || !strings.Contains(page, `name="confirm" value="yes"`) {
		t.Fatalf("confirmation page: status %d, want 200 with the text to erase and a confirming form:\n%s", status, page)
	}
	token := csrfField.FindStringSubmatch(page)[1]

	// A POST that skips the confirmation gets the confirmation instead.
	status, page = v.do("POST", base+"/versions/"+old+"/redact", url.Values{"csrf": {token}})
	if status != http.StatusBadRequest || !strings.Contains(page, "Nothing was redacted yet") || !strings.Contains(page, `name="confirm" value="yes"`) {
		t.Fatalf("unconfirmed redact: status %d, want 400 asking to confirm:\n%s", status, page)
	}
	if redacted(old) {
		t.Fatal("an unconfirmed redact erased the version")
	}

	// The current version: the page says why not and offers no form; a
	// confirmed POST is refused the same way.
	status, page = v.do("GET", base+"/versions/"+head+"/redact", nil)
	if status != http.StatusConflict || !strings.Contains(page, "current content") || strings.Contains(page, `name="confirm"`) {
		t.Fatalf("confirming the head: status %d, want 409 saying why, with no form:\n%s", status, page)
	}
	status, page = v.do("POST", base+"/versions/"+head+"/redact", url.Values{"csrf": {token}, "confirm": {"yes"}})
	if status != http.StatusBadRequest || !strings.Contains(page, "current content") {
		t.Fatalf("redacting the head: status %d, want 400 saying why:\n%s", status, page)
	}
	if redacted(head) {
		t.Fatal("the refused redaction erased the current version")
	}

	if status, _ = v.do("POST", base+"/versions/"+old+"/redact", url.Values{"csrf": {token}, "confirm": {"yes"}}); status != http.StatusSeeOther {
		t.Fatalf("confirmed redact: status %d, want 303 back to the history", status)
	}
	if !redacted(old) {
		t.Fatal("the confirmed redact left the text")
	}
	if got, _ := admin.GetMemory(ctx, store.ID, m.ID, client.GetMemoryParams{}); got == nil || *got.Content != newer {
		t.Fatalf("the redaction changed the memory: %+v", got)
	}
	// Once redacted, it is offered no more.
	if _, history = v.do("GET", base+"/memories/"+m.ID+"/history", nil); strings.Contains(history, "/redact") {
		t.Fatalf("the history still offers Redact after the redaction:\n%s", history)
	}
	if status, page = v.do("GET", base+"/versions/"+old+"/redact", nil); status != http.StatusConflict || !strings.Contains(page, "already redacted") {
		t.Fatalf("confirming a redacted version: status %d:\n%s", status, page)
	}
}
