package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/testdigest"
	"github.com/memstore/memstore/internal/testserver"
)

const testPassword = "correct horse battery"

// browserless is a console visitor speaking plain HTTP: a cookie jar, no
// redirects followed, so each answer can be checked as sent.
type browserless struct {
	t    testing.TB
	base string
	hc   *http.Client
}

func newVisitor(t testing.TB, srv *testserver.Server) *browserless {
	jar, _ := cookiejar.New(nil)
	return &browserless{t: t, base: srv.URL, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browserless) do(method, path string, form url.Values) (int, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, b.base+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the CSRF token of the forms on a page.
func (b *browserless) csrf(path string) string {
	b.t.Helper()
	_, page := b.do("GET", path, nil)
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatalf("no CSRF token on %s:\n%s", path, page)
	}
	return m[1]
}

func (b *browserless) login(name, password string) int {
	b.t.Helper()
	token := b.csrf("/console/login")
	status, _ := b.do("POST", "/console/login", url.Values{"csrf": {token}, "name": {name}, "password": {password}})
	return status
}

func startConsole(t testing.TB) *testserver.Server {
	t.Helper()
	srv := testserver.Start(t, testserver.Options{Console: true})
	if _, err := app.NewUsers(srv.Store, nil, nil).Create(context.Background(), "ada", testPassword); err != nil {
		t.Fatal(err)
	}
	return srv
}

func storeCount(t *testing.T, srv *testserver.Server) int {
	t.Helper()
	page, err := srv.Admin(t).ListMemoryStores(context.Background(), client.ListMemoryStoresParams{IncludeArchived: true})
	if err != nil {
		t.Fatal(err)
	}
	return len(page.Data)
}

func TestSignInRefusesAWrongPasswordAndThenRateLimits(t *testing.T) {
	srv := startConsole(t)
	v := newVisitor(t, srv)
	if status := v.login("ada", "not the password"); status != http.StatusUnauthorized {
		t.Fatalf("wrong password: status %d, want 401", status)
	}
	if status, _ := v.do("GET", "/console/", nil); status != http.StatusSeeOther {
		t.Fatalf("after a refused sign-in the stores page answered %d, want 303 to the login page", status)
	}
	// Four more wrong guesses use up this address's burst for the name;
	// the next is refused before the password is even checked, the right
	// one included.
	for range 4 {
		if status := v.login("ada", "guess"); status != http.StatusUnauthorized {
			t.Fatalf("wrong guess within the burst: status %d, want 401", status)
		}
	}
	if status := v.login("ada", testPassword); status != http.StatusTooManyRequests {
		t.Fatalf("sign-in after 5 failures: status %d, want 429", status)
	}
	if status, _ := v.do("GET", "/console/", nil); status != http.StatusSeeOther {
		t.Fatal("a rate-limited sign-in opened a session")
	}
}

func TestFormsRefuseAMissingCookieOrABadCSRFTokenAndChangeNothing(t *testing.T) {
	srv := startConsole(t)
	v := newVisitor(t, srv)
	if status := v.login("ada", testPassword); status != http.StatusSeeOther {
		t.Fatalf("sign-in: status %d, want 303", status)
	}
	token := v.csrf("/console/")

	stranger := newVisitor(t, srv)
	status, page := stranger.do("POST", "/console/stores", url.Values{"csrf": {token}, "name": {"no cookie"}})
	if status != http.StatusUnauthorized || !strings.Contains(page, "not signed in") {
		t.Fatalf("no cookie: status %d, want 401 saying so:\n%s", status, page)
	}
	for _, bad := range []string{"", "0123", strings.Repeat("a", len(token))} {
		status, page = v.do("POST", "/console/stores", url.Values{"csrf": {bad}, "name": {"bad token"}})
		if status != http.StatusForbidden || !strings.Contains(page, "CSRF token") {
			t.Fatalf("CSRF token %q: status %d, want 403 naming the token:\n%s", bad, status, page)
		}
	}
	if n := storeCount(t, srv); n != 0 {
		t.Fatalf("%d stores exist after refused requests, want 0", n)
	}
	if status, _ = v.do("POST", "/console/stores", url.Values{"csrf": {token}, "name": {"good"}}); status != http.StatusSeeOther {
		t.Fatalf("the same form with the right token: status %d, want 303", status)
	}
	if n := storeCount(t, srv); n != 1 {
		t.Fatalf("%d stores after one good request, want 1", n)
	}
}

func TestSessionCookieIsHttpOnlyStrictAndScopedToTheConsole(t *testing.T) {
	srv := startConsole(t)
	v := newVisitor(t, srv)
	token := v.csrf("/console/login")
	form := url.Values{"csrf": {token}, "name": {"ada"}, "password": {testPassword}}
	req, _ := http.NewRequest("POST", srv.URL+"/console/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := v.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "memstore_console" {
			session = c
		}
	}
	// Over plain HTTP it cannot be Secure (the browser would drop it); the
	// console sets Secure whenever it is served over TLS.
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/console/" || session.Secure {
		t.Fatalf("session cookie = %+v; want HttpOnly, SameSite=Strict, Path=/console/", session)
	}
}

func TestCookieIsNoAPICredentialAndAPIKeyOpensNoConsole(t *testing.T) {
	srv := startConsole(t)
	v := newVisitor(t, srv)
	v.login("ada", testPassword)
	u, _ := url.Parse(srv.URL + "/console/")
	var secret string
	for _, c := range v.hc.Jar.Cookies(u) {
		if c.Name == "memstore_console" {
			secret = c.Value
		}
	}
	if secret == "" {
		t.Fatal("no session cookie after sign-in")
	}
	for name, set := range map[string]func(*http.Request){
		"cookie":    func(r *http.Request) { r.AddCookie(&http.Cookie{Name: "memstore_console", Value: secret}) },
		"x-api-key": func(r *http.Request) { r.Header.Set("x-api-key", secret) },
		"bearer":    func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+secret) },
	} {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/memory_stores", nil)
		set(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("console session sent as %s to the API: status %d, want 401", name, resp.StatusCode)
		}
	}
	for name, set := range map[string]func(*http.Request){
		"x-api-key": func(r *http.Request) { r.Header.Set("x-api-key", srv.AdminKey) },
		"bearer":    func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+srv.AdminKey) },
		"cookie":    func(r *http.Request) { r.AddCookie(&http.Cookie{Name: "memstore_console", Value: srv.AdminKey}) },
	} {
		req, _ := http.NewRequest("POST", srv.URL+"/console/stores", strings.NewReader("name=x"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		set(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("API key sent as %s to the console: status %d, want 401", name, resp.StatusCode)
		}
	}
	if n := storeCount(t, srv); n != 0 {
		t.Fatalf("%d stores after refused requests, want 0", n)
	}
}

func TestDeletedUserIsSignedOut(t *testing.T) {
	srv := startConsole(t)
	v := newVisitor(t, srv)
	v.login("ada", testPassword)
	token := v.csrf("/console/")
	if err := app.NewUsers(srv.Store, nil, nil).Delete(context.Background(), "ada"); err != nil {
		t.Fatal(err)
	}
	if status, _ := v.do("GET", "/console/", nil); status != http.StatusSeeOther {
		t.Fatalf("a deleted user's page: status %d, want 303 to the login page", status)
	}
	if status, _ := v.do("POST", "/console/stores", url.Values{"csrf": {token}, "name": {"after delete"}}); status != http.StatusUnauthorized {
		t.Fatalf("a deleted user's form: status %d, want 401", status)
	}
	if n := storeCount(t, srv); n != 0 {
		t.Fatalf("%d stores after a deleted user's form, want 0", n)
	}
}

// signedInWithStore is a console with a store, and ada signed in to it.
func signedInWithStore(t *testing.T) (*testserver.Server, *browserless, api.MemoryStore) {
	t.Helper()
	srv := startConsole(t)
	store, err := srv.Admin(t).CreateMemoryStore(context.Background(), api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	v := newVisitor(t, srv)
	v.login("ada", testPassword)
	return srv, v, *store
}

func TestConsoleChangesAreAttributedToTheUser(t *testing.T) {
	srv, v, store := signedInWithStore(t)
	ctx := context.Background()
	token := v.csrf("/console/stores/" + store.ID + "/")
	if status, page := v.do("POST", "/console/stores/"+store.ID+"/memories", url.Values{"csrf": {token}, "path": {"/a.md"}, "content": {"hello"}}); status != http.StatusSeeOther {
		t.Fatalf("create memory: status %d\n%s", status, page)
	}
	users, _ := srv.Store.ListUsers(ctx)
	versions, err := srv.Admin(t).ListMemoryVersions(ctx, store.ID, client.ListMemoryVersionsParams{UserID: users[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(versions.Data) != 1 || versions.Data[0].CreatedBy != (api.Actor{Type: api.UserActor, UserID: users[0].ID}) {
		t.Fatalf("versions by user_id %s = %+v, want the one the console wrote, by a user_actor", users[0].ID, versions.Data)
	}
}

// Console writes count in memstore_memory_writes_total as API writes do:
// once each, and not when nothing changed or the write was refused.
func TestConsoleMemoryWritesAreCounted(t *testing.T) {
	srv, v, store := signedInWithStore(t)
	ctx := context.Background()
	storePage := "/console/stores/" + store.ID + "/"
	token := v.csrf(storePage)
	post := func(path string, form url.Values, want int) {
		t.Helper()
		form.Set("csrf", token)
		if status, page := v.do("POST", path, form); status != want {
			t.Fatalf("POST %s: status %d, want %d\n%s", path, status, want, page)
		}
	}
	post(storePage+"memories", url.Values{"path": {"/a.md"}, "content": {"one"}}, http.StatusSeeOther)
	var m api.Memory
	for it, err := range srv.Admin(t).ListAllMemories(ctx, store.ID, client.ListMemoriesParams{}) {
		if err != nil {
			t.Fatal(err)
		}
		m = *it.Memory
	}
	memPage := storePage + "memories/" + m.ID
	post(memPage, url.Values{"path": {"/a.md"}, "content": {"two"}, "sha": {m.ContentSHA256}}, http.StatusSeeOther)
	post(memPage, url.Values{"path": {"/a.md"}, "content": {"two"}, "sha": {testdigest.SHA256("two")}}, http.StatusSeeOther) // no change
	post(memPage, url.Values{"path": {"/a.md"}, "content": {"three"}, "sha": {m.ContentSHA256}}, http.StatusConflict)        // stale
	post(memPage+"/delete", url.Values{"sha": {testdigest.SHA256("two")}}, http.StatusSeeOther)

	got := testserver.Scrape(t, srv.Metrics)
	for op, want := range map[string]float64{"create": 1, "update": 1, "delete": 1} {
		if n := got[`memstore_memory_writes_total{op="`+op+`"}`]; n != want {
			t.Errorf("memory writes %s = %v, want %v", op, n, want)
		}
	}
}

func TestMintedEnvironmentKeyIsShownOnceAndPolls(t *testing.T) {
	srv := startConsole(t)
	ctx := context.Background()
	env, err := srv.Admin(t).CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	v := newVisitor(t, srv)
	v.login("ada", testPassword)
	token := v.csrf("/console/environments/" + env.ID)
	status, page := v.do("POST", "/console/environments/"+env.ID+"/keys", url.Values{"csrf": {token}, "name": {"ci"}})
	key := regexp.MustCompile(`<pre class="key">([^<]+)</pre>`).FindStringSubmatch(page)
	if status != http.StatusOK || key == nil {
		t.Fatalf("mint: status %d, no key shown:\n%s", status, page)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/v1/environments/"+env.ID+"/work/poll", nil)
	req.Header.Set("Authorization", "Bearer "+key[1])
	req.Header.Set("Anthropic-Worker-ID", "w1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("polling with the minted key: status %d, want 200", resp.StatusCode)
	}
	if _, page = v.do("GET", "/console/environments/"+env.ID, nil); strings.Contains(page, key[1]) || !strings.Contains(page, "<dt>Workers polling</dt><dd>1 ") {
		t.Fatalf("the environment page afterwards shows the key again or not the polling worker:\n%s", page)
	}

	// Revoking it refuses its next poll; revoking it again is refused in
	// words and changes nothing.
	keyID := regexp.MustCompile(`aria-label="revoke (envkey_[0-9A-Z]+)"`).FindStringSubmatch(page)
	if keyID == nil {
		t.Fatalf("no revoke button on the environment page:\n%s", page)
	}
	revoke := "/console/environments/" + env.ID + "/keys/" + keyID[1] + "/revoke"
	if status, _ := v.do("POST", revoke, url.Values{"csrf": {token}}); status != http.StatusSeeOther {
		t.Fatalf("revoke: status %d, want 303", status)
	}
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("polling with a revoked key: status %d, want 401", resp.StatusCode)
	}
	if status, page := v.do("POST", revoke, url.Values{"csrf": {token}}); status != http.StatusNotFound || !strings.Contains(page, "Nothing was revoked") {
		t.Fatalf("revoking twice: status %d:\n%s", status, page)
	}
}

func TestLiveSessionStreamEndsForADeletedUser(t *testing.T) {
	srv := startConsole(t)
	ctx := context.Background()
	admin := srv.Admin(t)
	env, _ := admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "e"})
	agent, _ := admin.CreateAgent(ctx, api.CreateAgentRequest{Name: "a", Model: api.ModelConfig{ID: api.ScriptedModel}})
	sess, err := admin.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: agent.ID}, EnvironmentID: env.ID})
	if err != nil {
		t.Fatal(err)
	}
	v := newVisitor(t, srv)
	v.login("ada", testPassword)
	req, _ := http.NewRequest("GET", srv.URL+"/console/sessions/"+sess.ID+"/stream", nil)
	resp, err := v.hc.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %v, %v", resp, err)
	}
	defer resp.Body.Close()
	ended := make(chan string, 1)
	go func() { b, _ := io.ReadAll(resp.Body); ended <- string(b) }()

	if err := app.NewUsers(srv.Store, nil, nil).Delete(ctx, "ada"); err != nil {
		t.Fatal(err)
	}
	// The next change of the log wakes the stream, which finds the user gone.
	if _, err := admin.SendEvents(ctx, sess.ID, api.UserMessage("again")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(time.Minute): // a hang guard, not a speed check
		t.Fatal("the stream of a deleted user is still open")
	}
}
