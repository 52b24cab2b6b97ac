package retention

import (
	"strings"
	"testing"
	"time"
)

// The form a policy is written in (the serve flag, the database column)
// reads back as the same policy.
func TestParseReadsWhatStringWrites(t *testing.T) {
	for _, p := range []Policy{{}, {KeepLast: 1}, {KeepLast: 20}, {MaxAge: 720 * time.Hour}, {MaxAge: 90 * time.Second}} {
		got, err := Parse(p.String())
		if err != nil || got != p {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", p.String(), got, err, p)
		}
	}
}

// Each malformed or out-of-bounds policy is refused with the forms to use.
func TestParseRefusals(t *testing.T) {
	for in, want := range map[string]string{
		"":                  "keep_last=N",
		"keep_some":         "keep_all, keep_last=N",
		"keep_all=3":        "keep_all takes no value",
		"keep_last=0":       "from 1 to 1000000",
		"keep_last=two":     "whole number",
		"keep_last=2000000": "keep 1 to 1000000",
		"max_age=soon":      "duration such as 720h",
		"max_age=-1h":       "duration such as 720h",
		"max_age=10ms":      "from 1s",
	} {
		if _, err := Parse(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error mentioning %q", in, err, want)
		}
	}
}
