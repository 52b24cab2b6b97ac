package api

// Version retention is memstore's own (SPEC §8): a store may keep every
// version of its memories (the default, as the hosted API does), only the
// newest N of each memory, or those younger than an age. memstore shows and
// takes the policy in one extra field of the memory store, named with its
// prefix so it never collides with a field the hosted API may add; official
// SDKs ignore a field they do not know.
const (
	// ExtensionRetention, in ExtensionsHeader, says the store resource
	// carries ExtensionRetentionField.
	ExtensionRetention = "version_retention"
	// ExtensionRetentionField is the memory store's retention field, on
	// responses and on create and update requests.
	ExtensionRetentionField = "memstore_version_retention"
)

// Retention types. RetentionServerDefault is sent on an update to make the
// store follow the server's default again; a response then shows the
// default's type with ServerDefault set.
const (
	RetentionKeepAll       = "keep_all"
	RetentionKeepLast      = "keep_last"
	RetentionMaxAge        = "max_age"
	RetentionServerDefault = "server_default"
)

// VersionRetention is a store's version retention policy. Whatever it says,
// each memory's newest version and every redacted version (the record of
// the redaction) are kept.
type VersionRetention struct {
	Type string `json:"type"`
	// KeepLast is the number of newest versions of each memory kept
	// (Type keep_last).
	KeepLast int `json:"keep_last,omitempty"`
	// MaxAgeSeconds is the age past which versions go (Type max_age).
	MaxAgeSeconds int64 `json:"max_age_seconds,omitempty"`
	// ServerDefault, on a response, says the store has no policy of its
	// own and follows the server's (memstore serve --version-retention).
	ServerDefault bool `json:"server_default,omitempty"`
}
