package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/app"
)

func TestCLIStoreExportThenImportGivesTheSameMemories(t *testing.T) {
	rs, _ := cliServer(t)
	conn := []string{"--base-url", rs.baseURL, "--api-key", rs.adminKey}
	ctx := context.Background()
	admin, err := client.New(rs.baseURL, client.WithAPIKey(rs.adminKey))
	if err != nil {
		t.Fatal(err)
	}
	src, _ := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "src"})
	for path, content := range map[string]string{"/a.md": "alpha", "/d/b.md": "beta", "/d/e/c.md": ""} {
		if _, err := admin.CreateMemory(ctx, src.ID, api.CreateMemoryRequest{Path: path, Content: content}); err != nil {
			t.Fatal(err)
		}
	}
	dst, _ := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "dst"})
	if _, err := admin.CreateMemory(ctx, dst.ID, api.CreateMemoryRequest{Path: "/a.md", Content: "stale"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"notes.tar.gz", "notes.zip"} {
		archive := filepath.Join(dir, name)
		if out := memstoreCLI(t, 0, append([]string{"store", "export", src.ID, "-o", archive}, conn...)...); !strings.Contains(out, "exported 3 memories") {
			t.Fatalf("export printed %q", out)
		}
		memstoreCLI(t, 1, append([]string{"store", "export", src.ID, "-o", archive}, conn...)...) // never overwrites
		out := memstoreCLI(t, 0, append([]string{"store", "import", dst.ID, archive}, conn...)...)
		if name == "notes.tar.gz" && !strings.Contains(out, "2 created, 1 changed, 0 already the same, 0 refused") {
			t.Fatalf("first import printed %q", out)
		}
		if name == "notes.zip" && !strings.Contains(out, "0 created, 0 changed, 3 already the same") {
			t.Fatalf("second import printed %q", out)
		}
	}
	if got, want := contents(t, admin, dst.ID), contents(t, admin, src.ID); !maps.Equal(got, want) {
		t.Fatalf("after import the copy holds %v, the source %v", got, want)
	}

	// A file the API would refuse is reported and changes nothing.
	bad := filepath.Join(dir, "bad.md")
	os.WriteFile(bad, []byte{0xff, 0xfe}, 0o600)
	memstoreCLI(t, 1, append([]string{"store", "import", dst.ID, bad}, conn...)...)
	if got := contents(t, admin, dst.ID); len(got) != 3 {
		t.Fatalf("a refused import left %d memories, want 3", len(got))
	}
}

func contents(t *testing.T, c *client.Client, storeID string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for it, err := range c.ListAllMemories(context.Background(), storeID, client.ListMemoriesParams{View: api.ViewFull, Limit: api.MaxFullViewListLimit}) {
		if err != nil {
			t.Fatal(err)
		}
		out[it.Memory.Path] = *it.Memory.Content
	}
	return out
}

func TestCLIUsersSignInToTheConsoleOfServe(t *testing.T) {
	rs, data := cliServer(t)
	memstoreCLIInput(t, 0, "a long enough password\n", "user", "create", "ada", "--data", data)
	memstoreCLIInput(t, 1, "short\n", "user", "passwd", "ada", "--data", data)
	// user list prints as every verb does: JSON for programs (never the
	// password hash), a table or YAML on request.
	var users []map[string]any
	if err := json.Unmarshal([]byte(memstoreCLI(t, 0, "user", "list", "--data", data)), &users); err != nil {
		t.Fatal(err)
	}
	if len(users) != 1 || users[0]["name"] != "ada" || !strings.HasPrefix(users[0]["id"].(string), "user_") || users[0]["created_at"] == nil || len(users[0]) != 3 {
		t.Fatalf("user list printed %v; want ada's id, name and created_at only", users)
	}
	if out := memstoreCLI(t, 0, "user", "list", "--data", data, "--output", "table"); !regexp.MustCompile(`^ID +NAME +CREATED_AT\nuser_\S+ +ada +\d{4}-`).MatchString(out) {
		t.Errorf("user list --output table printed:\n%s", out)
	}
	if out := memstoreCLI(t, 0, "user", "list", "--data", data, "--output", "yaml"); !strings.Contains(out, "  name: ada\n") {
		t.Errorf("user list --output yaml printed:\n%s", out)
	}
	if out := memstoreCLI(t, 2, "user", "list", "--data", data, "--output", "xml"); out != "" {
		t.Errorf("user list --output xml printed %q", out)
	}
	signIn := func(password string) int { return consoleSignIn(t, rs.baseURL, "ada", password) }
	if got := signIn("a long enough password"); got != http.StatusSeeOther {
		t.Fatalf("sign-in with the password user create set: %d, want 303", got)
	}
	memstoreCLI(t, 0, "user", "delete", "ada", "--data", data)
	if got := signIn("a long enough password"); got != http.StatusUnauthorized {
		t.Fatalf("sign-in after user delete: %d, want 401", got)
	}
}

// consoleSignIn posts the console's sign-in form as a browser would (the
// form's token matching its cookie) and returns the status.
func consoleSignIn(t *testing.T, baseURL, name, password string) int {
	t.Helper()
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := url.Values{"name": {name}, "password": {password}, "csrf": {"t"}}
	req, _ := http.NewRequest("POST", baseURL+"/console/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: "memstore_console_login", Value: "t"})
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A console page following a session live must not hold a shutdown: the
// feed ends with the API's own streams (otherwise Shutdown's grace period
// runs out and it returns an error).
func TestShutdownEndsLiveConsoleFeeds(t *testing.T) {
	t.Setenv("MEMSTORE_ADMIN_KEY", "")
	rs, err := startServer(context.Background(), serveOptions{addr: "127.0.0.1:0", dataDir: t.TempDir()}, slog.New(slog.DiscardHandler), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin, _ := client.New(rs.baseURL, client.WithAPIKey(rs.adminKey))
	env, _ := admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "e"})
	agent, _ := admin.CreateAgent(ctx, api.CreateAgentRequest{Name: "a", Model: api.ModelConfig{ID: api.ScriptedModel}})
	sess, err := admin.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: agent.ID}, EnvironmentID: env.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := app.NewUsers(rs.store, nil, nil).Create(ctx, "ada", "a long enough password"); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := url.Values{"name": {"ada"}, "password": {"a long enough password"}, "csrf": {"t"}}
	req, _ := http.NewRequest("POST", rs.baseURL+"/console/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: "memstore_console_login", Value: "t"})
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	req, _ = http.NewRequest("GET", rs.baseURL+"/console/sessions/"+sess.ID+"/stream", nil)
	for _, c := range resp.Cookies() {
		req.AddCookie(c)
	}
	stream, err := hc.Do(req)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("open the live feed: %v, %v", stream, err)
	}
	defer stream.Body.Close()
	if err := rs.shutdown(); err != nil {
		t.Fatalf("shutdown with a live console feed open: %v", err)
	}
}
