package console

import (
	"fmt"
	"html/template"
	"net/url"
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
	"query":    func(s string) string { return url.QueryEscape(s) },
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
// name (names maps their ids).
func actorText(names map[string]string, a storage.Actor) string {
	switch a.Kind {
	case "":
		return "nobody"
	case storage.ActorSession:
		return "session " + a.ID
	case storage.ActorAPIKey:
		return "API key " + a.ID
	case storage.ActorUser:
		if name, ok := names[a.ID]; ok {
			return name + " (console)"
		}
		return "user " + a.ID + " (deleted)"
	}
	return string(a.Kind)
}
