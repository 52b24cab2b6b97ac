package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/egress"
)

// MCPConfig configures how the Claude runtime reaches agents' MCP servers.
type MCPConfig struct {
	// HTTPClient carries every MCP connection; the server gives one that
	// dials only where internal/egress allows (default: such a client
	// under the strict rule).
	HTTPClient *http.Client
	// Bearers finds the token a session's vaults hold for a server URL;
	// nil means no credentials.
	Bearers BearerSource
	// CallTimeout bounds one tool call, connection included (default
	// DefaultMCPCallTimeout): a server that hangs gives the model an error
	// result instead of a stuck session.
	CallTimeout time.Duration
	// ListTimeout bounds listing one server's tools before a model request
	// (default DefaultMCPListTimeout).
	ListTimeout time.Duration
}

// MCP timeouts unless the server says otherwise.
const (
	DefaultMCPCallTimeout = 2 * time.Minute
	DefaultMCPListTimeout = 30 * time.Second
)

// BearerSource finds the static bearer token the session's vaults hold for
// an MCP server URL ("" when none does). It lives in the service layer,
// which alone can decrypt a vault's secrets.
type BearerSource interface {
	MCPBearer(ctx context.Context, vaultIDs []string, serverURL string) (string, error)
}

// mcpServer is an entry of the agent's mcp_servers.
type mcpServer struct {
	Type string `json:"type"`
	Name string `json:"name"`
	URL  string `json:"url"`
}

// mcpPolicy is an mcp_toolset's config of one tool (or its default).
type mcpPolicy struct {
	Name             string `json:"name"`
	Enabled          *bool  `json:"enabled"`
	PermissionPolicy *struct {
		Type string `json:"type"`
	} `json:"permission_policy"`
}

// mcpToolset is a tools entry of type mcp_toolset.
type mcpToolset struct {
	Type          string      `json:"type"`
	MCPServerName string      `json:"mcp_server_name"`
	DefaultConfig mcpPolicy   `json:"default_config"`
	Configs       []mcpPolicy `json:"configs"`
}

// permission is what the toolset says of tool: left out (""), "allow" or
// "ask". A tool's own config wins over the default; a toolset that says
// nothing asks, since an MCP tool may do anything its server can.
func (ts mcpToolset) permission(tool string) string {
	c := ts.DefaultConfig
	for _, o := range ts.Configs {
		if o.Name == tool {
			if o.Enabled != nil {
				c.Enabled = o.Enabled
			}
			if o.PermissionPolicy != nil {
				c.PermissionPolicy = o.PermissionPolicy
			}
		}
	}
	switch {
	case c.Enabled != nil && !*c.Enabled:
		return ""
	case c.PermissionPolicy != nil && c.PermissionPolicy.Type != "always_ask":
		return api.PermissionAllow
	default:
		return api.PermissionAsk
	}
}

// agentMCP reads the servers an agent's mcp_toolset entries offer, in the
// order of its tools, each with its toolset.
func agentMCP(servers, tools []json.RawMessage) ([]mcpServer, []mcpToolset) {
	byName := map[string]mcpServer{}
	for _, raw := range servers {
		var s mcpServer
		if json.Unmarshal(raw, &s) == nil && s.Name != "" {
			byName[s.Name] = s
		}
	}
	var (
		outS []mcpServer
		outT []mcpToolset
	)
	for _, raw := range tools {
		var ts mcpToolset
		if json.Unmarshal(raw, &ts) != nil || ts.Type != api.MCPToolsetType {
			continue
		}
		if s, ok := byName[ts.MCPServerName]; ok {
			outS, outT = append(outS, s), append(outT, ts)
			delete(byName, ts.MCPServerName) // one toolset per server
		}
	}
	return outS, outT
}

// mcpTool is one tool an MCP server offers the model.
type mcpTool struct {
	server      string
	name        string
	description string
	schema      json.RawMessage
	permission  string
}

// invalidToolChars are the characters a tool name may not have in the
// Messages API.
var invalidToolChars = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// mcpModelName is the name the model knows an MCP tool by:
// mcp__<server>__<tool>. It depends on nothing but the pair, so the
// conversation rebuilt from the log names a past call as the model saw it,
// and two servers' tools of one name stay apart. A pair the API's name
// rules (64 characters of [a-zA-Z0-9_-]) would change gets a hash of the
// exact pair instead of its tail, so it stays unique.
func mcpModelName(server, tool string) string {
	name := "mcp__" + server + "__" + tool
	clean := invalidToolChars.ReplaceAllString(name, "_")
	if clean == name && len(name) <= 64 {
		return name
	}
	sum := sha256.Sum256([]byte(server + "\x00" + tool))
	return clean[:min(len(clean), 55)] + "_" + hex.EncodeToString(sum[:4])
}

// declaration is the tool as the Messages API takes it: the server's
// description and input schema as the server gave them.
func (t mcpTool) declaration() anthropic.ToolUnionParam {
	return customTool{Name: mcpModelName(t.server, t.name), Description: t.description, InputSchema: t.schema}.declaration()
}

// mcpFailure is a server whose tools could not be listed.
type mcpFailure struct {
	server string
	auth   bool
	err    error
}

func (f mcpFailure) event() api.Event {
	kind, what := "mcp_connection_failed_error", "could not be reached"
	if f.auth {
		kind, what = "mcp_authentication_failed_error", "refused the session's credentials"
	}
	e := sessionError(kind, api.RetryRetrying, fmt.Sprintf("MCP server %q %s (%v), so its tools are not offered to the model this time; the next model request tries again. Check the server's URL, that it is up, and the static_bearer credential of the session's vaults for its URL", f.server, what, f.err))
	e.Error.MCPServerName = f.server
	return e
}

// mcpTools lists the tools of every MCP server the agent's toolsets name,
// with their permissions: the ones to offer, and the servers that failed.
func (c *Claude) mcpTools(ctx context.Context, agent api.SessionAgent, vaultIDs []string) ([]mcpTool, []mcpFailure) {
	servers, toolsets := agentMCP(agent.MCPServers, agent.Tools)
	var (
		out   []mcpTool
		fails []mcpFailure
	)
	for i, s := range servers {
		lctx, cancel := context.WithTimeout(ctx, c.cfg.MCP.ListTimeout)
		tools, err := c.listMCP(lctx, s, vaultIDs)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil
			}
			fails = append(fails, mcpFailure{server: s.Name, auth: isAuthFailure(err), err: err})
			continue
		}
		for _, t := range tools {
			perm := toolsets[i].permission(t.Name)
			if perm == "" {
				continue
			}
			schema, _ := json.Marshal(t.InputSchema)
			out = append(out, mcpTool{server: s.Name, name: t.Name, description: t.Description, schema: schema, permission: perm})
		}
	}
	return out, fails
}

// mcpListTTL is how long a server's tool list is reused: every model
// request needs the list, and connecting, initialising and listing for
// each one made every step of a turn wait on every MCP server. A server's
// new tools reach the model within this long; a failed list is never kept,
// so the next request tries the server again.
const mcpListTTL = 30 * time.Second

// mcpListCache holds tool lists by server URL and the vaults whose
// credentials reached it (another bearer may see other tools).
type mcpListCache struct {
	mu    sync.Mutex
	lists map[string]mcpList
}

type mcpList struct {
	tools []*mcp.Tool
	at    time.Time
}

func (l *mcpListCache) get(key string, now time.Time) ([]*mcp.Tool, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.lists[key]
	if !ok || now.Sub(e.at) >= mcpListTTL {
		delete(l.lists, key)
		return nil, false
	}
	return e.tools, true
}

func (l *mcpListCache) forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.lists, key)
}

// mcpListKey names a server's list as seen with these vaults' credentials.
func mcpListKey(s mcpServer, vaultIDs []string) string {
	return s.URL + "\x00" + strings.Join(vaultIDs, ",")
}

func (l *mcpListCache) put(key string, tools []*mcp.Tool, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lists == nil {
		l.lists = map[string]mcpList{}
	}
	l.lists[key] = mcpList{tools, now}
}

func (c *Claude) listMCP(ctx context.Context, s mcpServer, vaultIDs []string) ([]*mcp.Tool, error) {
	key := mcpListKey(s, vaultIDs)
	if tools, ok := c.mcpLists.get(key, time.Now()); ok {
		return tools, nil
	}
	tools, err := c.fetchMCPTools(ctx, s, vaultIDs)
	if err == nil {
		c.mcpLists.put(key, tools, time.Now())
	}
	return tools, err
}

func (c *Claude) fetchMCPTools(ctx context.Context, s mcpServer, vaultIDs []string) ([]*mcp.Tool, error) {
	cs, err := c.connectMCP(ctx, s, vaultIDs)
	if err != nil {
		return nil, err
	}
	defer closeMCP(ctx, cs)
	var tools []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// closeMCP ends an MCP session. After ctx ended (an interrupt, a
// timeout, the server stopping) it does so in the background: ending a
// session may wait for the server to give up the call in flight, and the
// turn must not wait with it.
func closeMCP(ctx context.Context, cs *mcp.ClientSession) {
	if ctx.Err() != nil {
		go cs.Close()
		return
	}
	cs.Close()
}

// errUnauthorized is a server that answered 401 or 403.
var errUnauthorized = errors.New("the server answered 401/403")

func isAuthFailure(err error) bool { return errors.Is(err, errUnauthorized) }

// connectMCP opens an MCP session with the server, with the session's
// bearer for its URL: Streamable HTTP, else the older SSE transport for a
// server that offers only that.
func (c *Claude) connectMCP(ctx context.Context, s mcpServer, vaultIDs []string) (*mcp.ClientSession, error) {
	bearer := ""
	if c.cfg.MCP.Bearers != nil && len(vaultIDs) > 0 {
		b, err := c.cfg.MCP.Bearers.MCPBearer(ctx, vaultIDs, s.URL)
		if err != nil {
			return nil, fmt.Errorf("reading the session's vaults: %w", err)
		}
		bearer = b
	}
	u, err := url.Parse(s.URL)
	if err != nil {
		return nil, fmt.Errorf("the server's URL %q: %w", s.URL, err)
	}
	hc := &http.Client{Transport: &authTransport{base: c.cfg.MCP.HTTPClient, bearer: bearer, host: u.Host},
		// Redirects are not followed, as for webhooks: the URL checked is
		// the one connected to.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	client := mcp.NewClient(&mcp.Implementation{Name: "memstore", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.URL, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err == nil || isAuthFailure(err) || ctx.Err() != nil {
		return cs, err
	}
	cs, sseErr := client.Connect(ctx, &mcp.SSEClientTransport{Endpoint: s.URL, HTTPClient: hc}, nil)
	if sseErr != nil {
		return nil, err // the Streamable HTTP error says most
	}
	return cs, nil
}

// authTransport adds the bearer to each request to the server's own host
// (never to where a redirect leads) and turns a 401/403 into
// errUnauthorized, so a refused credential is told apart from a server
// that is down.
type authTransport struct {
	base   *http.Client
	bearer string
	host   string
}

func (t *authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.bearer != "" && r.URL.Host == t.host {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+t.bearer)
	}
	rt := http.DefaultTransport
	if t.base != nil && t.base.Transport != nil {
		rt = t.base.Transport
	}
	resp, err := rt.RoundTrip(r)
	if err == nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		resp.Body.Close()
		return nil, fmt.Errorf("%w (%d)", errUnauthorized, resp.StatusCode)
	}
	return resp, err
}

// offerMCP adds the MCP tools to a request, keeping the cache breakpoint
// on the last tool.
func offerMCP(p *anthropic.MessageNewParams, tools []mcpTool) {
	if len(tools) == 0 {
		return
	}
	if n := len(p.Tools); n > 0 {
		p.Tools[n-1].OfTool.CacheControl = anthropic.CacheControlEphemeralParam{}
	}
	for _, t := range tools {
		p.Tools = append(p.Tools, t.declaration())
	}
	p.Tools[len(p.Tools)-1].OfTool.CacheControl = anthropic.NewCacheControlEphemeralParam()
}

// mcpUses turns the reply's calls of MCP tools, which replyEvents recorded
// as agent.tool_use calls of unknown tools, into agent.mcp_tool_use events
// with the server's own tool name and the toolset's permission.
func mcpUses(events []api.Event, tools []mcpTool) []api.Event {
	byName := map[string]mcpTool{}
	for _, t := range tools {
		byName[mcpModelName(t.server, t.name)] = t
	}
	for i, e := range events {
		if e.Type != api.EventAgentToolUse {
			continue
		}
		if t, ok := byName[e.Name]; ok {
			events[i] = api.Event{Type: api.EventAgentMCPToolUse, Name: t.name, MCPServerName: t.server, Input: e.Input, EvaluatedPermission: t.permission}
		}
	}
	return events
}

// callMCP makes the call of an agent.mcp_tool_use and records its result.
// Whatever fails — the server down, the credential refused, the call
// timing out, the tool reporting an error — the model gets an error result
// it can act on, and the session a session.error that says what happened:
// the turn never waits on a server.
func (c *Claude) callMCP(ctx context.Context, v viewLike, useID string, emit Emitter) error {
	var use api.Event
	for _, e := range v.log {
		if e.ID == useID {
			use = e
		}
	}
	var server mcpServer
	for _, raw := range v.agent.MCPServers {
		var s mcpServer
		if json.Unmarshal(raw, &s) == nil && s.Name == use.MCPServerName {
			server = s
		}
	}
	result := api.Event{Type: api.EventAgentMCPToolResult, MCPToolUseID: useID}
	fail := func(kind, text string) error {
		yes := true
		result.IsError, result.Content = &yes, api.TextContent(text)
		e := sessionError(kind, api.RetryExhausted, text)
		e.Error.MCPServerName = use.MCPServerName
		return emit(result, e)
	}
	if server.URL == "" {
		return fail("mcp_connection_failed_error", fmt.Sprintf("The agent has no MCP server named %q any more, so %s was not called.", use.MCPServerName, use.Name))
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.MCP.CallTimeout)
	defer cancel()
	out, err := c.callMCPTool(cctx, server, v.vaultIDs, use)
	if ctx.Err() != nil {
		return ctx.Err() // interrupted, or the server is stopping: the log decides again
	}
	if err != nil {
		// The server failed: the next request lists its tools again
		// rather than offer what it may no longer serve.
		c.mcpLists.forget(mcpListKey(server, v.vaultIDs))
	}
	switch {
	case isAuthFailure(err):
		return fail("mcp_authentication_failed_error", fmt.Sprintf("MCP server %q refused the session's credentials (%v), so %s did not run; the session's vaults need a static_bearer credential for %s that the server accepts.", server.Name, err, use.Name, server.URL))
	case errors.Is(err, context.DeadlineExceeded) || cctx.Err() != nil:
		return fail("mcp_connection_failed_error", fmt.Sprintf("MCP server %q did not answer the call of %s within %s; it may or may not have run.", server.Name, use.Name, c.cfg.MCP.CallTimeout))
	case err != nil:
		return fail("mcp_connection_failed_error", fmt.Sprintf("The call of %s on MCP server %q failed: %v.", use.Name, server.Name, err))
	case out.IsError:
		result.IsError = &out.IsError
		result.Content = mcpContent(out)
		e := sessionError("mcp_tool_error", api.RetryExhausted, fmt.Sprintf("MCP tool %s of server %q reported an error: %s", use.Name, server.Name, truncate(textOf(result.Content), 500)))
		e.Error.MCPServerName = server.Name
		return emit(result, e)
	}
	no := false
	result.IsError, result.Content = &no, mcpContent(out)
	return emit(result)
}

func (c *Claude) callMCPTool(ctx context.Context, s mcpServer, vaultIDs []string, use api.Event) (*mcp.CallToolResult, error) {
	cs, err := c.connectMCP(ctx, s, vaultIDs)
	if err != nil {
		return nil, err
	}
	defer closeMCP(ctx, cs)
	args := json.RawMessage(use.Input)
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: use.Name, Arguments: args})
}

// viewLike is what callMCP reads of the session.
type viewLike struct {
	log      []api.Event
	agent    api.SessionAgent
	vaultIDs []string
}

// mcpContent is a tool's result as text blocks: text as it came, anything
// else (images, resources, structured output alone) as its JSON.
func mcpContent(r *mcp.CallToolResult) []api.ContentBlock {
	var out []api.ContentBlock
	for _, c := range r.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			out = append(out, api.ContentBlock{Type: "text", Text: c.Text})
		default:
			raw, _ := json.Marshal(c)
			out = append(out, api.ContentBlock{Type: "text", Text: string(raw)})
		}
	}
	if len(out) == 0 && r.StructuredContent != nil {
		raw, _ := json.Marshal(r.StructuredContent)
		out = append(out, api.ContentBlock{Type: "text", Text: string(raw)})
	}
	if len(out) == 0 {
		out = api.TextContent("")
	}
	return out
}

func textOf(blocks []api.ContentBlock) string {
	var parts []string
	for _, b := range blocks {
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// withDefaults fills the zero values.
func (c MCPConfig) withDefaults() MCPConfig {
	if c.CallTimeout <= 0 {
		c.CallTimeout = DefaultMCPCallTimeout
	}
	if c.ListTimeout <= 0 {
		c.ListTimeout = DefaultMCPListTimeout
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Transport: &http.Transport{DialContext: egress.Policy{}.Dialer(30 * time.Second).DialContext}}
	}
	return c
}
