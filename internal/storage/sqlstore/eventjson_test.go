package sqlstore

import (
	"encoding/json"
	"testing"

	"github.com/memstore/memstore/api"
)

// An event's stored body is the same bytes json.Marshal writes, with and
// without extra fields (HTML characters escaped, the client's raw JSON
// compacted).
func TestEventJSONIsWhatJSONMarshalWrites(t *testing.T) {
	plain := api.UserMessage("a <b> & \"c\"\n")
	withExtra := api.UserMessage("x")
	withExtra.Extra = api.Extra{"vendor_field": json.RawMessage("{ \"a\" : \"<tag>\" }")}
	for name, e := range map[string]api.Event{"plain": plain, "extra": withExtra} {
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if got := eventJSON(e); got != string(want) {
			t.Errorf("%s: eventJSON = %s, want %s", name, got, want)
		}
	}
}
