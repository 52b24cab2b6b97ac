package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/secret"
	"github.com/memstore/memstore/internal/storage"
)

// Cookie names. The session cookie is scoped to the console's path and is
// HttpOnly and SameSite=Strict; it is Secure whenever the console is
// served over TLS.
const (
	sessionCookie = "memstore_console"
	loginCookie   = "memstore_console_login"
)

// request is what a signed-in page knows about its caller.
type request struct {
	User storage.User
	// CSRF is the token every form of the page carries back.
	CSRF string
	// Path is the request path, for the navigation's current-page mark.
	Path string
}

// Caller is who the console's changes are attributed to: the signed-in
// person, named by user_id in the log.
func (q *request) Caller() app.Caller {
	return app.Caller{Actor: storage.Actor{Kind: storage.ActorUser, ID: q.User.ID}, LogKey: "user_id", LogID: q.User.ID}
}

// csrfToken is derived from the session's secret: only a page that was
// served to the browser holding the cookie can know it, and nothing needs
// storing.
func csrfToken(secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("memstore console csrf"))
	return hex.EncodeToString(m.Sum(nil))
}

// pageHandler is a signed-in page; an error is shown as the error page.
type pageHandler func(w http.ResponseWriter, r *http.Request, q *request) error

// page wraps h: a request without a live session goes to the login page
// (a GET) or is refused (anything else), and every request that is not a
// GET must carry the session's CSRF token. A refused request changes
// nothing.
func (c *Console) page(h pageHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q, secret, err := c.session(r)
		if err != nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/console/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			c.fail(w, r, nil, &problem{http.StatusUnauthorized, "you are not signed in (or your session ended: signed out, expired, password changed or user deleted); sign in again and repeat the change"})
			return
		}
		if r.Method != http.MethodGet {
			r.Body = http.MaxBytesReader(w, r.Body, maxImportBytes)
			token := r.Header.Get("X-CSRF-Token")
			if token == "" {
				token = r.PostFormValue("csrf")
			}
			if subtle.ConstantTimeCompare([]byte(token), []byte(csrfToken(secret))) != 1 {
				c.log.WarnContext(r.Context(), "console request refused: missing or wrong CSRF token", "path", r.URL.Path, "user_id", q.User.ID)
				c.fail(w, r, q, &problem{http.StatusForbidden, "this form is stale or did not come from this console (its CSRF token does not match your session); reload the page and try again"})
				return
			}
		}
		if err := h(w, r, q); err != nil {
			c.fail(w, r, q, err)
		}
	}
}

// session resolves the session cookie.
func (c *Console) session(r *http.Request) (*request, string, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return nil, "", errors.New("no session cookie")
	}
	u, err := c.app.Users.SignedIn(r.Context(), ck.Value)
	if err != nil {
		return nil, "", err
	}
	return &request{User: u, CSRF: csrfToken(ck.Value), Path: r.URL.Path}, ck.Value, nil
}

func (c *Console) cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: name, Value: value, Path: Prefix, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	}
}

type loginView struct {
	Name, Next, Token, Error string
}

// loginPage shows the sign-in form. The form carries a token that must
// match a cookie set with it, so another site cannot sign a browser in to
// an account of its choosing.
func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.showLogin(w, r, http.StatusOK, loginView{Next: r.URL.Query().Get("next")})
}

func (c *Console) showLogin(w http.ResponseWriter, r *http.Request, status int, v loginView) {
	v.Token = secret.New("")
	http.SetCookie(w, c.cookie(r, loginCookie, v.Token, 3600))
	if err := c.render(w, r, nil, status, "login", "Sign in", v); err != nil {
		c.log.ErrorContext(r.Context(), "console login page failed", "error", err)
	}
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	name, password, next := r.PostFormValue("name"), r.PostFormValue("password"), r.PostFormValue("next")
	v := loginView{Name: name, Next: next}
	ck, err := r.Cookie(loginCookie)
	if err != nil || ck.Value == "" || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(r.PostFormValue("csrf"))) != 1 {
		v.Error = "This sign-in form is stale or did not come from this console. Try again."
		c.showLogin(w, r, http.StatusForbidden, v)
		return
	}
	if refusal := c.logins.allow(r.Context(), c.now(), name, clientIP(r)); refusal != "" {
		v.Error = string(refusal)
		c.showLogin(w, r, http.StatusTooManyRequests, v)
		return
	}
	_, cookie, err := c.app.Users.SignIn(r.Context(), name, password, c.cfg.SessionTTL)
	if err == nil || errors.Is(err, app.ErrWrongPassword) {
		c.logins.checked(c.now(), name, clientIP(r), err == nil)
	}
	if errors.Is(err, app.ErrWrongPassword) {
		c.log.InfoContext(r.Context(), "console sign-in refused: wrong name or password", "user", name, "remote_addr", clientIP(r))
		v.Error = "Wrong name or password."
		c.showLogin(w, r, http.StatusUnauthorized, v)
		return
	}
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	http.SetCookie(w, c.cookie(r, sessionCookie, cookie, int(c.cfg.SessionTTL/time.Second)))
	http.SetCookie(w, c.cookie(r, loginCookie, "", -1))
	// Only a console path is followed, never another site.
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") {
		next = Prefix
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, q *request) error {
	ck, _ := r.Cookie(sessionCookie)
	if err := c.app.Users.SignOut(r.Context(), ck.Value); err != nil {
		return err
	}
	http.SetCookie(w, c.cookie(r, sessionCookie, "", -1))
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
	return nil
}

// clientIP is the connection's address without its port. A proxy in front
// makes every client one address, which then shares one sign-in budget.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
