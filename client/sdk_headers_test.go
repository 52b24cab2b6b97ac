package client_test

import (
	"context"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/memstore/memstore/client"
)

// The client sends the anthropic-version the official SDK, the reference
// client, sends, so Anthropic's API treats both alike; this fails when a
// newer SDK moves to another version.
func TestAPIVersionIsTheOfficialSDKs(t *testing.T) {
	rec, c, _ := fixture(t, reply(200, storeJSON), reply(200, storeJSON))
	sdk := anthropic.NewClient(option.WithBaseURL(c.BaseURL()), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
	if _, err := sdk.Beta.MemoryStores.Get(context.Background(), "memstore_1", anthropic.BetaMemoryStoreGetParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetMemoryStore(context.Background(), "memstore_1"); err != nil {
		t.Fatal(err)
	}
	theirs, ours := rec.requests()[0].header, rec.requests()[1].header
	if got, want := ours.Get("Anthropic-Version"), theirs.Get("Anthropic-Version"); got != want || want != client.APIVersion {
		t.Errorf("anthropic-version %q, the SDK sends %q", got, want)
	}
}
