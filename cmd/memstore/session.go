package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

func newSessionCommand(s streams) *cobra.Command {
	return newAPINoun(s, "session", "run sessions (create, list, get, send, interrupt, events, archive, delete)", func(cli *cliContext) []*cobra.Command {
		ids := sessionIDs(cli)
		return []*cobra.Command{
			sessionCreateVerb(cli),
			sessionListVerb(cli),
			idVerb(cli, "get", "session-id", "show a session", "  memstore session get $SESSION", ids, (*client.Client).GetSession),
			sessionSendVerb(cli, ids),
			idVerb(cli, "interrupt", "session-id", "interrupt the session's turn", "  memstore session interrupt $SESSION", ids,
				func(c *client.Client, ctx context.Context, id string) (*api.SendEventsResponse, error) {
					return c.SendEvents(ctx, id, api.UserInterrupt())
				}),
			sessionEventsVerb(cli, ids),
			idVerb(cli, "archive", "session-id", "terminate and archive a session", "  memstore session archive $SESSION", ids, (*client.Client).ArchiveSession),
			idVerb(cli, "delete", "session-id", "delete a session and its events", "  memstore session delete $SESSION", ids, (*client.Client).DeleteSession),
		}
	})
}

// sessionIDs completes a session id.
func sessionIDs(cli *cliContext) cobra.CompletionFunc {
	return completeIDs(cli, func(ctx context.Context, c *client.Client) ([]api.Session, error) {
		p, err := c.ListSessions(ctx, api.SessionListParams{Limit: api.MaxListLimit})
		if err != nil {
			return nil, err
		}
		return p.Data, nil
	}, func(s api.Session) (string, string) {
		if s.Title != nil {
			return s.ID, *s.Title
		}
		return s.ID, s.Status
	})
}

// parseStoreFlag reads --store ID[:read_only|:read_write].
func parseStoreFlag(s string) (api.SessionResourceParams, error) {
	id, access, _ := strings.Cut(s, ":")
	switch access {
	case "", api.AccessReadWrite, api.AccessReadOnly:
	case "ro":
		access = api.AccessReadOnly
	case "rw":
		access = api.AccessReadWrite
	default:
		return api.SessionResourceParams{}, fmt.Errorf("--store %q: the access after the colon is read_only (ro) or read_write (rw)", s)
	}
	return api.SessionResourceParams{Type: api.ResourceMemoryStore, MemoryStoreID: id, Access: access}, nil
}

func sessionCreateVerb(cli *cliContext) *cobra.Command {
	var env, agent, title, message string
	var stores, instructions []string
	var md kvFlag
	cmd := verb("create --env ENV --agent AGENT [--store ID[:read_only]]... [--message TEXT]", "start a session of an agent on an environment, with memory stores",
		`  SESSION=$(memstore session create --env $ENV --agent $AGENT --store $STORE \
      --message '{"tool_calls":[{"name":"read","input":{"file_path":"/mnt/memory/team-notes/todo.md"}}]}' -q)
  memstore session create --env $ENV --agent $AGENT --store $HANDBOOK:ro --instructions "$HANDBOOK=the style guide"`,
		noArgs, func(ctx context.Context, _ []string) error {
			return sessionCreate(ctx, cli, env, agent, title, message, stores, instructions, md)
		})
	fs := cmd.Flags()
	fs.StringVar(&env, "env", "", "environment id (required)")
	fs.StringVar(&agent, "agent", "", "agent id (required)")
	fs.StringVar(&title, "title", "", "title")
	fs.StringArrayVar(&stores, "store", nil, "attach a memory store: ID, ID:read_only or ID:read_write (repeatable, at most 8)")
	fs.StringArrayVar(&instructions, "instructions", nil, "per-store guidance for the agent: ID=TEXT (repeatable)")
	fs.StringVar(&message, "message", "", "first user message: the text, @file, or - for standard input")
	md = metadataFlag(fs)
	cmd.RegisterFlagCompletionFunc("env", envIDs(cli))
	cmd.RegisterFlagCompletionFunc("agent", agentIDs(cli))
	cmd.RegisterFlagCompletionFunc("store", storeIDs(cli))
	return cmd
}

func sessionCreate(ctx context.Context, cli *cliContext, env, agent, title, message string, stores, instructions []string, md kvFlag) error {
	if env == "" || agent == "" {
		return fmt.Errorf("--env and --agent are required (see `memstore env list` and `memstore agent list`)")
	}
	req := api.CreateSessionRequest{Agent: api.AgentRef{ID: agent}, EnvironmentID: env, Metadata: md}
	if title != "" {
		req.Title = &title
	}
	for _, s := range stores {
		r, err := parseStoreFlag(s)
		if err != nil {
			return err
		}
		req.Resources = append(req.Resources, r)
	}
	for _, in := range instructions {
		id, text, ok := strings.Cut(in, "=")
		found := false
		for i := range req.Resources {
			if ok && req.Resources[i].MemoryStoreID == id {
				t := text
				req.Resources[i].Instructions, found = &t, true
			}
		}
		if !found {
			return fmt.Errorf("--instructions %q: want STORE_ID=TEXT for a store given with --store", in)
		}
	}
	if message != "" {
		text, err := textArg(message, cli.stdin)
		if err != nil {
			return err
		}
		req.InitialEvents = []api.Event{api.UserMessage(text)}
	}
	c, err := cli.client()
	if err != nil {
		return err
	}
	s, err := c.CreateSession(ctx, req)
	if err != nil {
		return err
	}
	return cli.print(s)
}

func sessionListVerb(cli *cliContext) *cobra.Command {
	var archived bool
	var env, agent, store string
	var statuses []string
	cmd := verb("list", "list sessions", `  memstore session list --env $ENV --status running --status idle`,
		argCount(0, 0), func(ctx context.Context, _ []string) error {
			c, err := cli.client()
			if err != nil {
				return err
			}
			p := api.SessionListParams{Limit: api.MaxListLimit, IncludeArchived: archived, EnvironmentID: env, AgentID: agent, MemoryStoreID: store, Statuses: statuses}
			return printAll(cli, c.ListAllSessions(ctx, p))
		})
	fs := cmd.Flags()
	fs.BoolVar(&archived, "archived", false, "include archived sessions")
	fs.StringVar(&env, "env", "", "only sessions of this environment")
	fs.StringVar(&agent, "agent", "", "only sessions of this agent")
	fs.StringVar(&store, "store", "", "only sessions with this memory store attached")
	fs.StringArrayVar(&statuses, "status", nil, "only sessions in this status (repeatable)")
	cmd.RegisterFlagCompletionFunc("env", envIDs(cli))
	cmd.RegisterFlagCompletionFunc("agent", agentIDs(cli))
	cmd.RegisterFlagCompletionFunc("store", storeIDs(cli))
	return cmd
}

func sessionSendVerb(cli *cliContext, ids cobra.CompletionFunc) *cobra.Command {
	cmd := verb("send <session-id> <text | @file | ->", "send a user message (a JSON script for the scripted model)",
		`  memstore session send $SESSION '{"tool_calls":[{"name":"bash","input":{"command":"ls"}}]}'
  memstore session send $SESSION @script.json`,
		argCount(2, 2), func(ctx context.Context, args []string) error {
			text, err := textArg(args[1], cli.stdin)
			if err != nil {
				return err
			}
			c, err := cli.client()
			if err != nil {
				return err
			}
			res, err := c.SendEvents(ctx, args[0], api.UserMessage(text))
			if err != nil {
				return err
			}
			return cli.print(res)
		})
	cmd.ValidArgsFunction = ids
	return cmd
}

func sessionEventsVerb(cli *cliContext, ids cobra.CompletionFunc) *cobra.Command {
	var follow, asJSON bool
	var types []string
	cmd := verb("events <session-id>", "print a session's events; --follow streams new ones", `  memstore session events $SESSION --follow
  memstore session events $SESSION --type agent.tool_use --json`,
		argCount(1, 1), func(ctx context.Context, args []string) error {
			return sessionEvents(ctx, cli, args[0], follow, asJSON, types)
		})
	fs := cmd.Flags()
	fs.BoolVar(&follow, "follow", false, "keep streaming new events until the session terminates (or Ctrl-C)")
	fs.BoolVar(&asJSON, "json", false, "print each event as one line of JSON")
	fs.StringArrayVar(&types, "type", nil, "only events of this type (repeatable; not with --follow)")
	cmd.ValidArgsFunction = ids
	return cmd
}

func sessionEvents(ctx context.Context, cli *cliContext, id string, follow, asJSON bool, types []string) error {
	if follow && len(types) > 0 {
		return fmt.Errorf("--type filters the history only; drop it to --follow")
	}
	c, err := cli.client()
	if err != nil {
		return err
	}
	print := func(e api.Event) error {
		if asJSON {
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cli.stdout, "%s\n", b)
			return err
		}
		_, err := fmt.Fprintln(cli.stdout, eventLine(e))
		return err
	}
	last, ended := "", false
	for e, err := range c.ListAllEvents(ctx, id, api.EventListParams{Limit: api.MaxEventListLimit, Types: types}) {
		if err != nil {
			return err
		}
		if err := print(e); err != nil {
			return err
		}
		last = e.ID
		ended = ended || e.Type == api.EventSessionStatusTerminated
	}
	if !follow || ended {
		return nil
	}
	return followEvents(ctx, c, id, last, print)
}

// followEvents streams a session's events after last, reconnecting where it
// left off when the connection drops, until the session terminates, is
// deleted, or ctx ends.
func followEvents(ctx context.Context, c *client.Client, id, last string, print func(api.Event) error) error {
	for {
		st, err := c.StreamEvents(ctx, id, client.StreamEventsParams{LastEventID: last})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for st.Next() {
			e := st.Event()
			if err := print(e); err != nil {
				st.Close()
				return err
			}
			if e.Type == api.EventSessionStatusTerminated || e.Type == api.EventSessionDeleted {
				st.Close()
				return nil
			}
		}
		last = st.LastEventID()
		st.Close()
		if ctx.Err() != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// eventLine is one human-readable line about an event.
func eventLine(e api.Event) string {
	at := ""
	if e.ProcessedAt != nil {
		at = e.ProcessedAt.UTC().Format(time.RFC3339)
	}
	detail := ""
	switch e.Type {
	case api.EventUserMessage, api.EventAgentMessage:
		detail = e.Text()
	case api.EventAgentToolUse:
		detail = fmt.Sprintf("%s %s", e.Name, e.Input)
	case api.EventUserToolResult:
		state := "ok"
		if e.IsError != nil && *e.IsError {
			state = "error"
		}
		detail = fmt.Sprintf("%s %s: %s", e.ToolUseID, state, e.Text())
	case api.EventSessionStatusIdle:
		if e.StopReason != nil {
			detail = e.StopReason.Type
			if len(e.StopReason.EventIDs) > 0 {
				detail += " " + strings.Join(e.StopReason.EventIDs, ",")
			}
		}
	case api.EventSessionError:
		if e.Error != nil {
			detail = e.Error.Type + ": " + e.Error.Message
		}
	}
	detail = strings.ReplaceAll(detail, "\n", " ⏎ ")
	if r := []rune(detail); len(r) > 300 {
		detail = string(r[:300]) + "…"
	}
	return strings.TrimRight(fmt.Sprintf("%s  %-20s %-26s %s", at, e.ID, e.Type, detail), " ")
}
