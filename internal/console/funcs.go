package console

import (
	"fmt"
	"html/template"
	"net/url"
	"strings"
	"time"

	"github.com/memstore/memstore/api"
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
// a *api.Actor, and names console users by name (names maps their ids).
func actorText(names map[string]string, v any) string {
	var a api.Actor
	switch x := v.(type) {
	case api.Actor:
		a = x
	case *api.Actor:
		if x == nil {
			return "nobody"
		}
		a = *x
	}
	switch a.Type {
	case api.SessionActor:
		return "session " + a.SessionID
	case api.APIActor:
		return "API key " + a.APIKeyID
	case api.UserActor:
		if name, ok := names[a.UserID]; ok {
			return name + " (console)"
		}
		return "user " + a.UserID + " (deleted)"
	}
	return a.Type
}
