package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

func init() {
	commands["chat"] = command{summary: "talk to an agent in the terminal (one message per line; Ctrl-C interrupts a turn; Ctrl-D ends)", run: runChat}
}

// runChat is a terminal conversation with a session, new or continued
// (see runChatSession).
func runChat(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cli := &cliContext{name: "chat", stdout: stdout, stderr: stderr}
	fs := cli.flags()
	env := fs.String("env", "", "environment id (for a new session)")
	agentID := fs.String("agent", "", "agent id (for a new session)")
	session := fs.String("session", "", "continue this session instead of creating one")
	var stores listFlag
	fs.Var(&stores, "store", "attach a memory store to the new session: ID, ID:read_only or ID:read_write (repeatable)")
	_, c, err := cli.connect(fs, args, "(--agent AGENT --env ENV [--store ID[:read_only]]... | --session SESSION) [flags]", 0, 0)
	if err != nil {
		return err
	}
	id := *session
	if id == "" {
		if *env == "" || *agentID == "" {
			return fmt.Errorf("give --agent and --env to start a session (see `memstore agent list` and `memstore env list`), or --session to continue one")
		}
		req := api.CreateSessionRequest{Agent: api.AgentRef{ID: *agentID}, EnvironmentID: *env}
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
	interrupts, release := takeInterrupts(ctx)
	defer release()
	return runChatSession(ctx, c, id, chatTerminal{in: stdin, out: stdout, interrupts: interrupts})
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
