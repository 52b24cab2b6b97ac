package server

import (
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/retention"
	"github.com/memstore/memstore/internal/storage"
)

// wireRetention shows the policy in force on a store.
func wireRetention(p retention.Policy, inherited bool) *api.VersionRetention {
	w := &api.VersionRetention{Type: p.Kind(), ServerDefault: inherited}
	switch p.Kind() {
	case retention.KindKeepLast:
		w.KeepLast = p.KeepLast
	case retention.KindMaxAge:
		w.MaxAgeSeconds = int64(p.MaxAge / time.Second)
	}
	return w
}

// retentionSetting reads the retention field of a create or update body.
// Its bounds are the service's to check; here only its shape.
func retentionSetting(w api.VersionRetention) (storage.RetentionSetting, error) {
	const field = api.ExtensionRetentionField
	const forms = `send {"type":"keep_all"}, {"type":"keep_last","keep_last":N}, {"type":"max_age","max_age_seconds":S} or {"type":"server_default"}`
	var set storage.RetentionSetting
	if w.ServerDefault {
		return set, apiErrorf(invalidRequest, "%s.server_default: is set by the server on responses; to follow the server's default %s", field, forms)
	}
	switch w.Type {
	case api.RetentionKeepAll, api.RetentionServerDefault:
		if w.KeepLast != 0 || w.MaxAgeSeconds != 0 {
			return set, apiErrorf(invalidRequest, "%s: type %q takes neither keep_last nor max_age_seconds; %s", field, w.Type, forms)
		}
		set.Inherit = w.Type == api.RetentionServerDefault
	case api.RetentionKeepLast:
		if w.KeepLast < 1 || w.MaxAgeSeconds != 0 {
			return set, apiErrorf(invalidRequest, "%s: type keep_last needs keep_last, the number of newest versions of each memory to keep (1 to %d), and no max_age_seconds", field, retention.MaxKeepLast)
		}
		set.Policy.KeepLast = w.KeepLast
	case api.RetentionMaxAge:
		if w.MaxAgeSeconds < 1 || w.MaxAgeSeconds > int64(retention.MaxMaxAge/time.Second) || w.KeepLast != 0 {
			return set, apiErrorf(invalidRequest, "%s: type max_age needs max_age_seconds, the age in seconds past which versions go (1 to %d), and no keep_last", field, int64(retention.MaxMaxAge/time.Second))
		}
		set.Policy.MaxAge = time.Duration(w.MaxAgeSeconds) * time.Second
	default:
		return set, apiErrorf(invalidRequest, "%s.type: %q is not a retention type; %s", field, w.Type, forms)
	}
	return set, nil
}
