package console

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/url"
	"strings"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// funcs are the helpers every template may call.
var funcs = template.FuncMap{
	"when": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			return v.UTC().Format("2006-01-02 15:04:05 UTC")
		case *time.Time:
			if v == nil {
				return ""
			}
			return v.UTC().Format("2006-01-02 15:04:05 UTC")
		}
		return fmt.Sprint(t)
	},
	"size": func(n int64) string {
		switch {
		case n < 1024:
			return fmt.Sprintf("%d B", n)
		case n < 1024*1024:
			return fmt.Sprintf("%.1f KiB", float64(n)/1024)
		}
		return fmt.Sprintf("%.1f MiB", float64(n)/(1024*1024))
	},
	"actor":    actorText,
	"query":    func(s string) string { return url.QueryEscape(s) },
	"deref":    func(s *string) string { return derefString(s) },
	"isTrue":   func(b *bool) bool { return b != nil && *b },
	"basename": func(p string) string { return p[strings.LastIndexByte(strings.TrimSuffix(p, "/"), '/')+1:] },
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// actorText names who made a change, in words; it takes an api.Actor or
// a *api.Actor, and names console users by name (names looks them up).
func actorText(names *userNames, v any) (string, error) {
	var a api.Actor
	switch x := v.(type) {
	case api.Actor:
		a = x
	case *api.Actor:
		if x == nil {
			return "nobody", nil
		}
		a = *x
	}
	switch a.Type {
	case api.SessionActor:
		return "session " + a.SessionID, nil
	case api.APIActor:
		return "API key " + a.APIKeyID, nil
	case api.UserActor:
		name, err := names.name(a.UserID)
		if err != nil {
			return "", err
		}
		if name == "" {
			return "user " + a.UserID + " (deleted)", nil
		}
		return name + " (console)", nil
	}
	return a.Type, nil
}

// userNames names the console users one page mentions, reading each from
// the store once, when the page first needs it: a page costs a read per
// user it shows, not one of every user there is.
type userNames struct {
	ctx   context.Context
	store storage.Users
	// known maps the ids read so far to names; "" is a deleted user.
	known map[string]string
}

func (n *userNames) name(id string) (string, error) {
	if name, ok := n.known[id]; ok {
		return name, nil
	}
	u, err := n.store.UserByID(n.ctx, id)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return "", err
	}
	if n.known == nil {
		n.known = map[string]string{}
	}
	n.known[id] = u.Name
	return u.Name, nil
}
