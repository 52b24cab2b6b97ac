package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

func newChatCommand(s streams) *cobra.Command {
	cli := &cliContext{streams: s}
	var env, agentID, session string
	var stores []string
	cmd := &cobra.Command{
		Use:   "chat (--agent AGENT --env ENV [--store ID[:read_only]]... | --session SESSION)",
		Short: "talk to an agent in the terminal (one message per line; Ctrl-D ends)",
		Example: `  memstore chat --env $ENV --agent $AGENT --store $STORE
  memstore chat --session $SESSION
  printf 'hi\nwhat do you remember?\n' | memstore chat --env $ENV --agent $AGENT`,
		Args: argCount(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runChat(cmd.Context(), cli, env, agentID, session, stores)
		},
	}
	fs := cmd.Flags()
	cli.conn.register(fs)
	fs.StringVar(&env, "env", "", "environment id (for a new session)")
	fs.StringVar(&agentID, "agent", "", "agent id (for a new session)")
	fs.StringVar(&session, "session", "", "continue this session instead of creating one")
	fs.StringArrayVar(&stores, "store", nil, "attach a memory store to the new session: ID, ID:read_only or ID:read_write (repeatable)")
	cmd.RegisterFlagCompletionFunc("env", envIDs(cli))
	cmd.RegisterFlagCompletionFunc("agent", agentIDs(cli))
	cmd.RegisterFlagCompletionFunc("store", storeIDs(cli))
	cmd.RegisterFlagCompletionFunc("session", sessionIDs(cli))
	cli.explainErrors(cmd)
	return cmd
}

// runChat is a terminal conversation with a session: it reads one message
// per line of standard input (a terminal or a pipe), sends it, and prints
// the session's events until the turn ends. At the end it prints the
// session's token usage.
func runChat(ctx context.Context, cli *cliContext, env, agentID, session string, stores []string) error {
	stdout := cli.stdout
	c, err := cli.client()
	if err != nil {
		return err
	}
	id := session
	if id == "" {
		if env == "" || agentID == "" {
			return fmt.Errorf("give --agent and --env to start a session (see `memstore agent list` and `memstore env list`), or --session to continue one")
		}
		req := api.CreateSessionRequest{Agent: api.AgentRef{ID: agentID}, EnvironmentID: env}
		for _, s := range stores {
			r, err := parseStoreFlag(s)
			if err != nil {
				return err
			}
			req.Resources = append(req.Resources, r)
		}
		s, err := c.CreateSession(ctx, req)
		if err != nil {
			return err
		}
		id = s.ID
	}
	fmt.Fprintf(stdout, "session %s — one message per line; Ctrl-C interrupts the turn and leaves, Ctrl-D ends.\nContinue it later with: memstore chat --session %s\n", id, id)

	// The stream starts with the events after it connects, so it connects
	// before the first message goes out.
	st, err := c.StreamEvents(ctx, id, client.StreamEventsParams{})
	if err != nil {
		return err
	}
	turnOver := make(chan bool, 1) // true: the session terminated
	go followChat(ctx, c, id, st, stdout, turnOver)

	lines := bufio.NewScanner(cli.stdin)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for {
		fmt.Fprint(stdout, "you> ")
		if !lines.Scan() {
			break
		}
		text := strings.TrimSpace(lines.Text())
		if text == "" {
			continue
		}
		if _, err := c.SendEvents(ctx, id, api.UserMessage(text)); err != nil {
			return err
		}
		select {
		case ended := <-turnOver:
			if ended {
				return printUsage(c, id, stdout)
			}
		case <-ctx.Done():
			// Ctrl-C: interrupt the turn on the way out.
			ictx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := c.SendEvents(ictx, id, api.UserInterrupt()); err != nil {
				return fmt.Errorf("the turn could not be interrupted: %w", err)
			}
			fmt.Fprintln(stdout, "\ninterrupted")
			return printUsage(c, id, stdout)
		}
	}
	fmt.Fprintln(stdout)
	return printUsage(c, id, stdout)
}

// followChat prints the session's events as a conversation, reconnecting
// where it left off, and reports on turnOver when a turn ends.
func followChat(ctx context.Context, c *client.Client, id string, st *client.EventStream, stdout io.Writer, turnOver chan<- bool) {
	for {
		for st.Next() {
			e := st.Event()
			if line := chatLine(e); line != "" {
				fmt.Fprintln(stdout, line)
			}
			switch {
			case e.Type == api.EventSessionStatusTerminated || e.Type == api.EventSessionDeleted:
				turnOver <- true
				st.Close()
				return
			case e.Type == api.EventSessionStatusIdle:
				select {
				case turnOver <- false:
				default:
				}
			}
		}
		last := st.LastEventID()
		st.Close()
		for {
			if ctx.Err() != nil {
				return
			}
			var err error
			if st, err = c.StreamEvents(ctx, id, client.StreamEventsParams{LastEventID: last}); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// chatLine is how the chat shows an event: the agent's text in full, each
// tool call and its result on one line, errors and waits; "" for the rest.
func chatLine(e api.Event) string {
	oneLine := func(s string, n int) string {
		s = strings.ReplaceAll(strings.TrimSpace(s), "\n", " ⏎ ")
		if r := []rune(s); len(r) > n {
			s = string(r[:n]) + "…"
		}
		return s
	}
	switch e.Type {
	case api.EventAgentMessage:
		return "agent> " + e.Text()
	case api.EventAgentToolUse:
		line := fmt.Sprintf("  tool   %s %s", e.Name, oneLine(string(e.Input), 120))
		if e.EvaluatedPermission == api.PermissionAsk {
			line += " (needs confirmation)"
		}
		return line
	case api.EventUserToolResult:
		state := "ok"
		if e.IsError != nil && *e.IsError {
			state = "error"
		}
		return fmt.Sprintf("  result %s: %s", state, oneLine(e.Text(), 120))
	case api.EventSessionError:
		if e.Error != nil {
			status := ""
			if e.Error.RetryStatus != nil {
				status = " (" + e.Error.RetryStatus.Type + ")"
			}
			return "  error  " + e.Error.Message + status
		}
	case api.EventSessionStatusIdle:
		if e.StopReason != nil && e.StopReason.Type == api.StopRequiresAction {
			return "  waiting for " + strings.Join(e.StopReason.EventIDs, ", ") + ": a worker, or a user.tool_confirmation (memstore session events shows the calls)"
		}
	case api.EventSessionStatusTerminated:
		return "  the session terminated"
	}
	return ""
}

// printUsage prints what the session has cost in tokens.
func printUsage(c *client.Client, id string, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.GetSession(ctx, id)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil
		}
		return err
	}
	u := s.Usage
	fmt.Fprintf(stdout, "usage: %d input tokens, %d output tokens, %d read from cache, %d written to cache\n",
		u.InputTokens, u.OutputTokens, u.CacheReadInputTokens, u.CacheCreation.Ephemeral5mInputTokens+u.CacheCreation.Ephemeral1hInputTokens)
	return nil
}
