package main

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strings"

	"github.com/spf13/cobra"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

func newAgentCommand(s streams) *cobra.Command {
	return newAPINoun(s, "agent", "manage agents (create, list, get, archive)", func(cli *cliContext) []*cobra.Command {
		ids := agentIDs(cli)
		return []*cobra.Command{
			agentCreateVerb(cli),
			listVerb(cli, "list agents", "agents", "  memstore agent list --output table",
				func(c *client.Client, ctx context.Context, archived bool) iter.Seq2[api.Agent, error] {
					return c.ListAllAgents(ctx, api.AgentListParams{IncludeArchived: archived, Limit: api.MaxListLimit})
				}),
			idVerb(cli, "get", "agent-id", "show an agent", "  memstore agent get $AGENT", ids, (*client.Client).GetAgent),
			idVerb(cli, "archive", "agent-id", "archive an agent (no new sessions)", "  memstore agent archive $AGENT", ids, (*client.Client).ArchiveAgent),
		}
	})
}

// agentIDs completes an agent id.
func agentIDs(cli *cliContext) cobra.CompletionFunc {
	return completeIDs(cli, func(ctx context.Context, c *client.Client) ([]api.Agent, error) {
		p, err := c.ListAgents(ctx, api.AgentListParams{Limit: api.MaxListLimit})
		if err != nil {
			return nil, err
		}
		return p.Data, nil
	}, func(a api.Agent) (string, string) { return a.ID, a.Name })
}

func agentCreateVerb(cli *cliContext) *cobra.Command {
	var model, system, desc, tools string
	var skills []string
	var md kvFlag
	cmd := verb("create <name>", "create an agent", `  AGENT=$(memstore agent create notes-bot -q)
  memstore agent create note-taker --model claude-sonnet-4-5 --system "Keep the team's notes tidy."`,
		argCount(1, 1), func(ctx context.Context, args []string) error {
			req := api.CreateAgentRequest{Name: args[0], Model: api.ModelConfig{ID: model}, Metadata: md}
			err := json.Unmarshal([]byte(tools), &req.Tools)
			if err != nil {
				return fmt.Errorf("--tools must be a JSON array of tool objects: %w", err)
			}
			if req.Skills, err = skillEntries(skills); err != nil {
				return err
			}
			if system != "" {
				req.System = &system
			}
			if desc != "" {
				req.Description = &desc
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
		})
	fs := cmd.Flags()
	fs.StringVar(&model, "model", api.ScriptedModel, "model id: \"scripted\" (each message is a JSON script of tool calls), or a Claude model such as claude-sonnet-4-5, which the server calls with its model API key")
	fs.StringVar(&system, "system", "", "system prompt")
	fs.StringVar(&desc, "description", "", "description")
	fs.StringVar(&tools, "tools", `[{"type":"agent_toolset_20260401"}]`, "tools as a JSON array")
	fs.StringArrayVar(&skills, "skill", nil, "a skill the agent has, SKILL_ID or SKILL_ID@VERSION (default: its latest when a session starts); repeat for several")
	md = metadataFlag(fs)
	return cmd
}

// skillEntries turns --skill values (SKILL_ID or SKILL_ID@VERSION) into
// an agent's skills entries.
func skillEntries(flags []string) ([]json.RawMessage, error) {
	var out []json.RawMessage
	for _, f := range flags {
		id, version, _ := strings.Cut(f, "@")
		if id == "" {
			return nil, usageError{Err: fmt.Errorf("--skill %q: give SKILL_ID or SKILL_ID@VERSION (memstore skill list shows the ids)", f)}
		}
		e := map[string]string{"type": "custom", "skill_id": id}
		if version != "" {
			e["version"] = version
		}
		b, _ := json.Marshal(e) // a map of strings always encodes
		out = append(out, b)
	}
	return out, nil
}
