package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/workercli"
)

func newChatCommand(s streams) *cobra.Command {
	cli := &cliContext{streams: s}
	var env, agentID, session string
	var stores []string
	hook := customToolHook{timeout: defaultCustomToolTimeout}
	cmd := &cobra.Command{
		Use:   "chat (--agent AGENT --env ENV [--store ID[:read_only]]... | --session SESSION)",
		Short: "talk to an agent in the terminal (one message per line; Ctrl-C interrupts a turn; Ctrl-D ends)",
		Example: `  memstore chat --env $ENV --agent $AGENT --store $STORE
  memstore chat --session $SESSION
  memstore chat --session $SESSION --custom-tool-cmd ./answer-tool.sh
  printf 'hi\nwhat do you remember?\n' | memstore chat --env $ENV --agent $AGENT`,
		Args: argCount(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var custom *customToolHook
			if hook.command != "" {
				if hook.timeout <= 0 {
					return fmt.Errorf("--custom-tool-timeout must be positive, got %s (e.g. 30s or 2m)", hook.timeout)
				}
				custom = &hook
			}
			return runChat(cmd.Context(), cli, env, agentID, session, stores, custom)
		},
	}
	fs := cmd.Flags()
	cli.conn.register(fs)
	fs.StringVar(&env, "env", "", "environment id (for a new session)")
	fs.StringVar(&agentID, "agent", "", "agent id (for a new session)")
	fs.StringVar(&session, "session", "", "continue this session instead of creating one")
	fs.StringArrayVar(&stores, "store", nil, "attach a memory store to the new session: ID, ID:read_only or ID:read_write (repeatable)")
	fs.StringVar(&hook.command, "custom-tool-cmd", "", "answer the agent's custom tool calls with this shell command (run with sh -c; the call's JSON input on stdin, MEMSTORE_TOOL_NAME and MEMSTORE_TOOL_USE_ID set; stdout is the result, a non-zero exit an error with stderr)")
	fs.DurationVar(&hook.timeout, "custom-tool-timeout", defaultCustomToolTimeout, "how long --custom-tool-cmd may run before it is stopped and the call answered with an error")
	cmd.RegisterFlagCompletionFunc("env", envIDs(cli))
	cmd.RegisterFlagCompletionFunc("agent", agentIDs(cli))
	cmd.RegisterFlagCompletionFunc("store", storeIDs(cli))
	cmd.RegisterFlagCompletionFunc("session", sessionIDs(cli))
	cli.explainErrors(cmd)
	return cmd
}

// runChat is a terminal conversation with a session, new or continued
// (see runChatSession).
func runChat(ctx context.Context, cli *cliContext, env, agentID, session string, stores []string, custom *customToolHook) error {
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
	interrupts, release := workercli.TakeInterrupts(ctx)
	defer release()
	return runChatSession(ctx, c, id, chatTerminal{in: cli.stdin, out: cli.stdout, interrupts: interrupts,
		workerWait: func() <-chan time.Time { return time.After(chatWorkerWait) }, customTool: custom})
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
