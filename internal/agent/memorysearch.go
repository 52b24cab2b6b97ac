package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// memorySearchTool is the tool the Claude runtime offers beside the
// toolset when a session has memory stores: the model finds memories by
// their words in one call, instead of grepping the mounted folders. The
// runtime answers it itself, from the server's full-text index; a worker
// leaves it alone (it is none of its tools).
const memorySearchTool = "memory_search"

// MemorySearcher searches the memory stores storeIDs (the session's) for
// query: the best hits first, as the service's Search answers.
type MemorySearcher func(ctx context.Context, storeIDs []string, query string) ([]storage.SearchHit, error)

// offersMemorySearch reports whether the session's requests offer
// memory_search: the server can search, the session has memory stores,
// and no tool of the agent (built-in or custom) already has the name.
func (c *Claude) offersMemorySearch(v storage.SessionView, perms map[string]string) bool {
	if c.cfg.Search == nil || len(sessionStores(v)) == 0 {
		return false
	}
	if _, taken := perms[memorySearchTool]; taken {
		return false
	}
	for _, t := range customTools(v.Session.Agent.Tools, perms) {
		if t.Name == memorySearchTool {
			return false
		}
	}
	return true
}

// sessionStores lists the ids of the session's memory stores.
func sessionStores(v storage.SessionView) []string {
	var ids []string
	for _, r := range v.Session.Resources {
		if r.Type == api.ResourceMemoryStore && r.MemoryStoreID != "" {
			ids = append(ids, r.MemoryStoreID)
		}
	}
	return ids
}

// memorySearchDeclaration is memory_search as the Messages API takes it.
func memorySearchDeclaration() anthropic.ToolUnionParam {
	return anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
		Name:        memorySearchTool,
		Description: anthropic.String("Search your memory stores by the words memories hold (in their content or path), best matches first, each with an excerpt and the file's path under its mount. Faster than grep over the mounted folders; read a file to see all of it."),
		InputSchema: anthropic.ToolInputSchemaParam{
			Properties: map[string]any{"query": map[string]any{"type": "string", "description": "words to look for; a memory matches when it holds every one"}},
			Required:   []string{"query"},
		},
	}}
}

// pendingSearch returns the turn's first unanswered memory_search call.
func (c *Claude) pendingSearch(v storage.SessionView, t *modelTurn) (*toolUse, bool) {
	if !c.offersMemorySearch(v, toolPermissions(v.Session.Agent.Tools)) {
		return nil, false
	}
	for _, u := range t.uses {
		if u.name == memorySearchTool && !u.custom && !u.resolved() {
			return u, true
		}
	}
	return nil, false
}

// answerSearch runs a memory_search call and appends its result: the hits
// as paths under the stores' mounts, or what was wrong with the query.
func (c *Claude) answerSearch(ctx context.Context, v storage.SessionView, u *toolUse, emit Emitter) error {
	var in struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(u.input, &in); err != nil || strings.TrimSpace(in.Query) == "" {
		return emit(api.UserToolResult(u.id, `memory_search needs {"query": "some words"}: give the words to look for`, true))
	}
	if len(storage.SearchTerms(in.Query)) == 0 {
		return emit(api.UserToolResult(u.id, fmt.Sprintf("the query %q holds no word to search for: give one or more words (letters or digits)", in.Query), true))
	}
	hits, err := c.cfg.Search(ctx, sessionStores(v), in.Query)
	var ae *api.Error
	switch {
	case errors.As(err, &ae):
		return emit(api.UserToolResult(u.id, ae.Message, true))
	case err != nil:
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return emit(api.UserToolResult(u.id, fmt.Sprintf("the search failed (%v); read the mounted folders instead", err), true))
	}
	if len(hits) == 0 {
		return emit(api.UserToolResult(u.id, fmt.Sprintf("No memory holds every word of %q.", in.Query), false))
	}
	mounts := map[string]string{}
	for _, r := range v.Session.Resources {
		mounts[r.MemoryStoreID] = strings.TrimSuffix(r.MountPath, "/")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d match(es) for %q, best first:\n", len(hits), in.Query)
	for _, h := range hits {
		fmt.Fprintf(&b, "- %s%s: %s\n", mounts[h.Memory.StoreID], h.Memory.Path, strings.Join(strings.Fields(h.Snippet), " "))
	}
	return emit(api.UserToolResult(u.id, b.String(), false))
}
