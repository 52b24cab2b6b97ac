package main

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

func init() {
	commands["agent"] = command{summary: "manage agents (create, list, get, archive)", run: noun("agent", map[string]verb{
		"create": {summary: "create an agent", run: agentCreate},
		"list": listVerb("list agents", "agents", func(c *client.Client, ctx context.Context, archived bool) iter.Seq2[api.Agent, error] {
			return c.ListAllAgents(ctx, api.AgentListParams{IncludeArchived: archived, Limit: api.MaxListLimit})
		}),
		"get":     idVerb("show an agent", "agent-id", (*client.Client).GetAgent),
		"archive": idVerb("archive an agent (no new sessions)", "agent-id", (*client.Client).ArchiveAgent),
	})}
}

func agentCreate(ctx context.Context, cli *cliContext, args []string) error {
	fs := cli.flags()
	model := fs.String("model", api.ScriptedModel, "model id: \"scripted\" (each message is a JSON script of tool calls), or a Claude model such as claude-sonnet-4-5, which the server calls with its model API key")
	system := fs.String("system", "", "system prompt")
	desc := fs.String("description", "", "description")
	tools := fs.String("tools", `[{"type":"agent_toolset_20260401"}]`, "tools as a JSON array")
	md := kvFlag{}
	fs.Var(md, "metadata", "metadata key=value (repeatable)")
	pos, err := cli.parse(fs, args, "[flags] <name>", 1, 1)
	if err != nil {
		return err
	}
	req := api.CreateAgentRequest{Name: pos[0], Model: api.ModelConfig{ID: *model}, Metadata: md}
	if err := json.Unmarshal([]byte(*tools), &req.Tools); err != nil {
		return fmt.Errorf("--tools must be a JSON array of tool objects: %w", err)
	}
	if *system != "" {
		req.System = system
	}
	if *desc != "" {
		req.Description = desc
	}
	c, err := cli.client()
	if err != nil {
		return err
	}
	a, err := c.CreateAgent(ctx, req)
	if err != nil {
		return err
	}
	return cli.print(a)
}
