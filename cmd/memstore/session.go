package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

func init() {
	commands["session"] = command{summary: "run sessions (create, list, get, send, interrupt, events, archive, delete)", run: noun("session", map[string]verb{
		"create": {summary: "start a session of an agent on an environment, with memory stores", run: sessionCreate},
		"list":   {summary: "list sessions", run: sessionList},
		"get":    idVerb("show a session", "session-id", (*client.Client).GetSession),
		"send":   {summary: "send a user message (a JSON script for the scripted model)", run: sessionSend},
		"interrupt": idVerb("interrupt the session's turn", "session-id", func(c *client.Client, ctx context.Context, id string) (*api.SendEventsResponse, error) {
			return c.SendEvents(ctx, id, api.UserInterrupt())
		}),
		"events":  {summary: "print a session's events; --follow streams new ones", run: sessionEvents},
		"archive": idVerb("terminate and archive a session", "session-id", (*client.Client).ArchiveSession),
		"delete":  idVerb("delete a session and its events", "session-id", (*client.Client).DeleteSession),
	})}
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

func sessionCreate(ctx context.Context, cli *cliContext, args []string) error {
	fs := cli.flags()
	env := fs.String("env", "", "environment id (required)")
	agent := fs.String("agent", "", "agent id (required)")
	title := fs.String("title", "", "title")
	var stores, instructions listFlag
	fs.Var(&stores, "store", "attach a memory store: ID, ID:read_only or ID:read_write (repeatable, at most 8)")
	fs.Var(&instructions, "instructions", "per-store guidance for the agent: ID=TEXT (repeatable)")
	message := fs.String("message", "", "first user message: the text, @file, or - for standard input")
	md := kvFlag{}
	fs.Var(md, "metadata", "metadata key=value (repeatable)")
	if _, err := cli.parse(fs, args, "--env ENV --agent AGENT [--store ID[:read_only]]... [--message TEXT] [flags]", 0, 0); err != nil {
		return err
	}
	if *env == "" || *agent == "" {
		return fmt.Errorf("--env and --agent are required (see `memstore env list` and `memstore agent list`)")
	}
	req := api.CreateSessionRequest{Agent: api.AgentRef{ID: *agent}, EnvironmentID: *env, Metadata: md}
	if *title != "" {
		req.Title = title
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
	if *message != "" {
		text, err := textArg(*message, stdin)
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

func sessionList(ctx context.Context, cli *cliContext, args []string) error {
	fs := cli.flags()
	archived := fs.Bool("archived", false, "include archived sessions")
	env := fs.String("env", "", "only sessions of this environment")
	agent := fs.String("agent", "", "only sessions of this agent")
	store := fs.String("store", "", "only sessions with this memory store attached")
	var statuses listFlag
	fs.Var(&statuses, "status", "only sessions in this status (repeatable)")
	_, c, err := cli.connect(fs, args, "[flags]", 0, 0)
	if err != nil {
		return err
	}
	p := api.SessionListParams{Limit: api.MaxListLimit, IncludeArchived: *archived, EnvironmentID: *env, AgentID: *agent, MemoryStoreID: *store, Statuses: statuses}
	return printAll(cli, c.ListAllSessions(ctx, p))
}

func sessionSend(ctx context.Context, cli *cliContext, args []string) error {
	pos, err := cli.parse(cli.flags(), args, "[flags] <session-id> <text | @file | ->", 2, 2)
	if err != nil {
		return err
	}
	text, err := textArg(pos[1], stdin)
	if err != nil {
		return err
	}
	c, err := cli.client()
	if err != nil {
		return err
	}
	res, err := c.SendEvents(ctx, pos[0], api.UserMessage(text))
	if err != nil {
		return err
	}
	return cli.print(res)
}

func sessionEvents(ctx context.Context, cli *cliContext, args []string) error {
	fs := cli.flags()
	follow := fs.Bool("follow", false, "keep streaming new events until the session terminates (or Ctrl-C)")
	asJSON := fs.Bool("json", false, "print each event as one line of JSON")
	var types listFlag
	fs.Var(&types, "type", "only events of this type (repeatable; not with --follow)")
	pos, err := cli.parse(fs, args, "[flags] <session-id>", 1, 1)
	if err != nil {
		return err
	}
	if *follow && len(types) > 0 {
		return fmt.Errorf("--type filters the history only; drop it to --follow")
	}
	c, err := cli.client()
	if err != nil {
		return err
	}
	id := pos[0]
	print := func(e api.Event) error {
		if *asJSON {
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
	if !*follow || ended {
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
