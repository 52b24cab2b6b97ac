package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/memstore/memstore/api"
)

// customToolHook answers an agent's custom tool calls from the chat with a
// shell command, so a script can stand in for the application that would
// otherwise answer them through the API.
type customToolHook struct {
	command string
	timeout time.Duration
}

// defaultCustomToolTimeout bounds a --custom-tool-cmd run: long enough for a
// script that calls out to a service, short enough that a hung one does
// not stall the conversation for good.
const defaultCustomToolTimeout = time.Minute

// answer runs the command for call (its input on stdin, the tool's name
// and the call's id in MEMSTORE_TOOL_NAME and MEMSTORE_TOOL_USE_ID) and
// makes its user.custom_tool_result: stdout as the content, or, when the
// command fails or runs out of time, an error with its stderr.
func (h customToolHook) answer(ctx context.Context, call api.Event) api.Event {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", h.command)
	cmd.Stdin = bytes.NewReader(call.Input)
	cmd.Env = append(os.Environ(), "MEMSTORE_TOOL_NAME="+call.Name, "MEMSTORE_TOOL_USE_ID="+call.ID)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A child the command left behind may hold the pipes open; the result
	// does not wait for it past this.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	isError := err != nil
	text := stdout.String()
	if isError {
		text = strings.TrimSpace(stderr.String())
		var exit *exec.ExitError
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			text = strings.TrimSpace(fmt.Sprintf("the tool's command did not finish within %s and was stopped\n%s", h.timeout, text))
		case text == "" && errors.As(err, &exit):
			text = fmt.Sprintf("the tool's command exited with status %d and wrote nothing to stderr", exit.ExitCode())
		case text == "":
			text = "the tool's command could not run: " + err.Error()
		}
	}
	if text == "" {
		// The model's API refuses an empty text block.
		text = "(the tool printed nothing)"
	}
	return api.Event{Type: api.EventUserCustomToolResult, CustomToolUseID: call.ID, Content: api.TextContent(text), IsError: &isError}
}
