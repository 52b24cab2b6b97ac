package app

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/agent"
	"github.com/memstore/memstore/internal/egress"
)

// MCPConfig configures the agents' MCP servers. The zero value refuses
// servers on addresses that are not globally reachable, and plain HTTP.
type MCPConfig struct {
	// AllowPrivate accepts MCP server URLs on loopback, private,
	// link-local, … addresses, and plain HTTP (serve --mcp-allow-private),
	// for development and tests.
	AllowPrivate bool
}

// mcpEgress is where MCP server URLs may point: the webhooks' rule, lifted
// by its own flag.
func (a *App) mcpEgress() egress.Policy {
	return egress.Policy{AllowPrivate: a.cfg.MCP.AllowPrivate, Override: "memstore serve --mcp-allow-private"}
}

// modelConfig is the Claude runtime's configuration: the operator's, with
// MCP connections dialled through the egress rule and bearers read from
// the sessions' vaults.
func (a *App) modelConfig() agent.ClaudeConfig {
	cfg := a.cfg.Model
	if cfg.MCP.HTTPClient == nil {
		cfg.MCP.HTTPClient = &http.Client{Transport: &http.Transport{
			DialContext:         a.mcpEgress().Dialer(30 * time.Second).DialContext,
			TLSHandshakeTimeout: 10 * time.Second,
		}}
	}
	if cfg.MCP.Bearers == nil {
		cfg.MCP.Bearers = a.Vaults
	}
	return cfg
}

// mcpServerParams is an mcp_servers entry as the hosted API takes it.
type mcpServerParams struct {
	Type string `json:"type"`
	Name string `json:"name"`
	URL  string `json:"url"`
}

// mcpToolsetParams is the part of an mcp_toolset entry checked here.
type mcpToolsetParams struct {
	Type          string          `json:"type"`
	MCPServerName string          `json:"mcp_server_name"`
	DefaultConfig *mcpToolConfig  `json:"default_config"`
	Configs       []mcpToolConfig `json:"configs"`
}

type mcpToolConfig struct {
	Name             *string `json:"name"`
	Enabled          *bool   `json:"enabled"`
	PermissionPolicy *struct {
		Type string `json:"type"`
	} `json:"permission_policy"`
}

// checkMCP refuses an agent's mcp_servers and mcp_toolset entries unless
// each server is {type:"url", name, url} with a unique name and a URL the
// egress rule allows (at most api.MaxMCPServers), and each toolset names
// one of them, once, with policies the runtime knows.
func (a *App) checkMCP(ctx context.Context, servers, tools []json.RawMessage) error {
	if len(servers) > api.MaxMCPServers {
		return api.Errorf(api.InvalidRequest, "mcp_servers has %d servers; an agent may have at most %d", len(servers), api.MaxMCPServers)
	}
	names := map[string]bool{}
	for i, raw := range servers {
		var s mcpServerParams
		if err := strictJSON(raw, &s); err != nil {
			return api.Errorf(api.InvalidRequest, "mcp_servers[%d] must be {\"type\":\"url\",\"name\":\"…\",\"url\":\"https://…\"}: %v", i, err)
		}
		switch {
		case s.Type != "url":
			return api.Errorf(api.InvalidRequest, "mcp_servers[%d].type must be \"url\", got %q", i, s.Type)
		case s.Name == "" || len(s.Name) > 255:
			return api.Errorf(api.InvalidRequest, "mcp_servers[%d].name must be 1 to 255 characters; the agent's mcp_toolset entries refer to the server by it", i)
		case names[s.Name]:
			return api.Errorf(api.InvalidRequest, "mcp_servers[%d].name %q is used by another server of the agent; give each server its own name", i, s.Name)
		}
		names[s.Name] = true
		if err := a.mcpEgress().CheckURL(ctx, "mcp_servers["+itoa(i)+"].url", s.URL); err != nil {
			return api.Errorf(api.InvalidRequest, "%v", err)
		}
	}
	offered := map[string]bool{}
	for i, raw := range tools {
		var ts mcpToolsetParams
		if json.Unmarshal(raw, &ts) != nil || ts.Type != api.MCPToolsetType {
			continue
		}
		switch {
		case ts.MCPServerName == "":
			return api.Errorf(api.InvalidRequest, "tools[%d]: an mcp_toolset needs mcp_server_name, the name of one of the agent's mcp_servers", i)
		case !names[ts.MCPServerName]:
			return api.Errorf(api.InvalidRequest, "tools[%d]: mcp_server_name %q names none of the agent's mcp_servers; add {\"type\":\"url\",\"name\":%q,\"url\":\"…\"} to mcp_servers", i, ts.MCPServerName, ts.MCPServerName)
		case offered[ts.MCPServerName]:
			return api.Errorf(api.InvalidRequest, "tools[%d]: MCP server %q already has an mcp_toolset; configure its tools in that one entry", i, ts.MCPServerName)
		}
		offered[ts.MCPServerName] = true
		check := func(what string, c mcpToolConfig) error {
			if p := c.PermissionPolicy; p != nil && p.Type != "always_allow" && p.Type != "always_ask" && p.Type != "auto" {
				return api.Errorf(api.InvalidRequest, "tools[%d].%s.permission_policy.type must be \"always_allow\", \"always_ask\" or \"auto\", got %q", i, what, p.Type)
			}
			return nil
		}
		if ts.DefaultConfig != nil {
			if err := check("default_config", *ts.DefaultConfig); err != nil {
				return err
			}
		}
		for j, c := range ts.Configs {
			if c.Name == nil || *c.Name == "" {
				return api.Errorf(api.InvalidRequest, "tools[%d].configs[%d] needs name, the MCP tool it configures", i, j)
			}
			if err := check("configs["+itoa(j)+"]", c); err != nil {
				return err
			}
		}
	}
	return nil
}

// strictJSON decodes an object, refusing fields v does not have, so a
// misspelt field is heard of at once.
func strictJSON(raw json.RawMessage, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

func itoa(i int) string { return strconv.Itoa(i) }
