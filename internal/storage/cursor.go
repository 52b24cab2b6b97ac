package storage

import (
	"encoding/base64"
	"encoding/json"
)

// Cursor kinds: a cursor names the listing that issued it, so one listing's
// cursor handed to another is refused instead of silently misread.
const (
	CursorMemoryStores   = "memory_stores"
	CursorMemories       = "memories"
	CursorMemoryVersions = "memory_versions"
)

// StoreCursor is the kind of a listing within one store: its cursors name
// the store, so a cursor from another store's listing is refused rather
// than read as a position in this one.
func StoreCursor(kind, storeID string) string {
	return kind + "/" + storeID
}

type cursor struct {
	Kind string `json:"k"`
	Key  string `json:"v"`
}

// EncodeCursor makes an opaque page cursor holding key, the position the
// next page starts from. The encoding is shared by every backend, so a
// cursor means the same thing whichever one issued it; clients must treat
// it as opaque all the same.
func EncodeCursor(kind, key string) string {
	b, _ := json.Marshal(cursor{Kind: kind, Key: key})
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor returns the key of a cursor made by EncodeCursor for the same
// kind of listing, or ErrBadCursor.
func DecodeCursor(kind, s string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return "", ErrBadCursor
	}
	var c cursor
	if err := json.Unmarshal(b, &c); err != nil || c.Kind != kind || c.Key == "" {
		return "", ErrBadCursor
	}
	return c.Key, nil
}
