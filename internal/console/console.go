// Package console is memstore's web console: people sign in with a name and
// a password to browse, edit, diff, restore and redact memories, watch
// sessions live and manage environment keys. It is plain HTML from
// html/template with its assets embedded in the binary, and it changes
// nothing except through the service layer (internal/app) the API calls
// too, so a console edit can never do what an API request could not, and
// follows every write with the same side effects.
package console

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/storage"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Prefix is where the console is served.
const Prefix = "/console/"

// Config configures a Console. Zero values take the documented defaults.
type Config struct {
	// App is the service layer every change goes through (required); the
	// console reads its store, and logs with its logger.
	App *app.App
	// Now is the console's clock (login rate limits); nil means time.Now.
	Now func() time.Time
	// Closing, when closed, ends the live views (the session page's
	// stream), so a shutdown does not wait for their browsers.
	Closing <-chan struct{}
	// SessionTTL is how long a sign-in lasts (default 12 hours).
	SessionTTL time.Duration
	// ImportDir is where import previews are staged (serve: the data
	// folder's imports/); "" is the system's temporary folder.
	ImportDir string
	// MountPrefix is the server's --mount-prefix, under which the
	// sessions the console starts mount their stores ("" is /mnt/memory).
	MountPrefix string
}

// Console serves the web console. Build it with New and mount Handler at
// Prefix.
type Console struct {
	cfg Config
	app *app.App
	// store is the app's store, for the pages' reads.
	store  storage.Store
	log    *slog.Logger
	now    func() time.Time
	pages  map[string]*template.Template
	logins *signInLimits
	// imports stages import previews until they are applied.
	imports *importStaging
	mux     *http.ServeMux
}

// New builds a Console in front of cfg.App.
func New(cfg Config) (*Console, error) {
	if cfg.App == nil {
		return nil, errors.New("console: Config needs the App whose services it calls")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	c := &Console{
		cfg:    cfg,
		app:    cfg.App,
		store:  cfg.App.Store(),
		log:    cfg.App.Logger(),
		now:    func() time.Time { return cfg.Now().UTC() },
		logins: newSignInLimits(cfg.App.Logger()),
		mux:    http.NewServeMux(),
	}
	var err error
	if c.imports, err = newImportStaging(cfg.ImportDir); err != nil {
		return nil, err
	}
	if c.pages, err = parsePages(); err != nil {
		return nil, err
	}
	c.routes()
	return c, nil
}

// Handler serves every console page under Prefix.
func (c *Console) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// The console's own pages are all it ever shows: no framing, no
		// third-party script, and no inline script at all.
		h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		c.mux.ServeHTTP(w, r)
	})
}

func (c *Console) routes() {
	static, _ := fs.Sub(staticFS, "static")
	c.mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET /console/login", c.loginPage)
	c.mux.HandleFunc("POST /console/login", c.login)
	c.mux.HandleFunc("POST /console/logout", c.page(c.logout))

	c.mux.HandleFunc("GET /console/{$}", c.page(c.storesPage))
	c.mux.HandleFunc("POST /console/stores", c.page(c.createStore))
	c.mux.HandleFunc("GET /console/stores/{store}/", c.page(c.treePage))
	c.mux.HandleFunc("GET /console/stores/{store}/search", c.page(c.searchPage))
	c.mux.HandleFunc("GET /console/stores/{store}/settings", c.page(c.storeSettings))
	c.mux.HandleFunc("POST /console/stores/{store}/settings", c.page(c.updateStore))
	c.mux.HandleFunc("POST /console/stores/{store}/archive", c.page(c.archiveStore))
	c.mux.HandleFunc("POST /console/stores/{store}/delete", c.page(c.deleteStore))
	c.mux.HandleFunc("POST /console/stores/{store}/memories", c.page(c.createMemory))
	c.mux.HandleFunc("GET /console/stores/{store}/memories/{memory}", c.page(c.memoryPage))
	c.mux.HandleFunc("POST /console/stores/{store}/memories/{memory}", c.page(c.saveMemory))
	c.mux.HandleFunc("POST /console/stores/{store}/memories/{memory}/delete", c.page(c.deleteMemory))
	c.mux.HandleFunc("GET /console/stores/{store}/memories/{memory}/history", c.page(c.historyPage))
	c.mux.HandleFunc("GET /console/stores/{store}/memories/{memory}/diff", c.page(c.diffPage))
	c.mux.HandleFunc("GET /console/stores/{store}/versions/{version}", c.page(c.versionPage))
	c.mux.HandleFunc("POST /console/stores/{store}/versions/{version}/restore", c.page(c.restoreVersion))
	c.mux.HandleFunc("GET /console/stores/{store}/versions/{version}/redact", c.page(c.redactConfirmPage))
	c.mux.HandleFunc("POST /console/stores/{store}/versions/{version}/redact", c.page(c.confirmedRedaction(c.redactVersion)))
	c.mux.HandleFunc("GET /console/stores/{store}/export", c.page(c.exportStore))
	c.mux.HandleFunc("POST /console/stores/{store}/import", c.page(c.importStore))

	c.mux.HandleFunc("GET /console/sessions", c.page(c.sessionsPage))
	c.mux.HandleFunc("GET /console/sessions/{session}", c.page(c.sessionPage))
	c.mux.HandleFunc("GET /console/sessions/{session}/stream", c.page(c.sessionStream))
	c.agentRoutes()
	c.talkRoutes()
	c.mux.HandleFunc("GET /console/environments", c.page(c.environmentsPage))
	c.mux.HandleFunc("GET /console/environments/{env}", c.page(c.environmentPage))
	c.mux.HandleFunc("POST /console/environments/{env}/keys", c.page(c.mintKey))
	c.mux.HandleFunc("POST /console/environments/{env}/keys/{key}/revoke", c.page(c.revokeKey))
	c.mux.HandleFunc("GET /console/webhooks", c.page(c.webhooksPage))
	c.mux.HandleFunc("GET /console/skills", c.page(c.skillsPage))
	c.mux.HandleFunc("GET /console/skills/{skill}", c.page(c.skillPage))
	c.mux.HandleFunc("POST /console/webhooks", c.page(c.createWebhook))

	c.mux.HandleFunc("/console/", c.page(func(w http.ResponseWriter, r *http.Request, q *request) error {
		return notFound("there is no console page at %s; start from the list of stores", r.URL.Path)
	}))
}

// parsePages parses each page template together with the layout.
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, name := range names {
		base := strings.TrimPrefix(name, "templates/")
		if base == "layout.html" {
			continue
		}
		t, err := template.New(base).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", name)
		if err != nil {
			return nil, fmt.Errorf("console template %s: %w", base, err)
		}
		pages[strings.TrimSuffix(base, ".html")] = t
	}
	return pages, nil
}

// problem is a refusal shown to the person: the status and what to do.
type problem struct {
	status int
	msg    string
}

func (p *problem) Error() string { return p.msg }

func notFound(format string, args ...any) error {
	return &problem{http.StatusNotFound, fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return &problem{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// render writes a page: the layout with the named page's content.
func (c *Console) render(w http.ResponseWriter, r *http.Request, q *request, status int, page, title string, data any) error {
	t, ok := c.pages[page]
	if !ok {
		return fmt.Errorf("console: no page template %q", page)
	}
	var b strings.Builder
	view := struct {
		Title string
		Req   *request
		Data  any
		// Names names the console users the page shows, for "who".
		Names *userNames
	}{title, q, data, &userNames{ctx: r.Context(), store: c.store}}
	if err := t.ExecuteTemplate(&b, "layout", view); err != nil {
		return fmt.Errorf("console: render %s: %w", page, err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, err := w.Write([]byte(b.String()))
	return err
}

// fail answers err as an error page: a *problem with its status and words,
// anything else as a logged 500.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, q *request, err error) {
	var p *problem
	if !errors.As(err, &p) {
		c.log.ErrorContext(r.Context(), "console page failed", "path", r.URL.Path, "method", r.Method, "error", err)
		p = &problem{http.StatusInternalServerError, "something went wrong on the server; the error is in its log (console page failed, with this path)"}
	}
	if rerr := c.render(w, r, q, p.status, "error", http.StatusText(p.status), p.msg); rerr != nil {
		c.log.ErrorContext(r.Context(), "console error page failed", "path", r.URL.Path, "error", rerr)
	}
}
