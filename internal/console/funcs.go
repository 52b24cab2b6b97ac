package console

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"strings"
	"time"

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
	"isTrue":   func(b *bool) bool { return b != nil && *b },
	"basename": func(p string) string { return p[strings.LastIndexByte(strings.TrimSuffix(p, "/"), '/')+1:] },
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// actorText names who made a change, in words, and names console users by
// name (names looks them up).
func actorText(names *userNames, a storage.Actor) (string, error) {
	switch a.Kind {
	case "":
		return "nobody", nil
	case storage.ActorSession:
		return "session " + a.ID, nil
	case storage.ActorAPIKey:
		return "API key " + a.ID, nil
	case storage.ActorUser:
		name, err := names.name(a.ID)
		if err != nil {
			return "", err
		}
		if name == "" {
			return "user " + a.ID + " (deleted)", nil
		}
		return name + " (console)", nil
	}
	return string(a.Kind), nil
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
