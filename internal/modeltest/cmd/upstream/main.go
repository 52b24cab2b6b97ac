// Command upstream serves modeltest's Messages API on loopback for a
// by-hand run of memstore chat in a real terminal, without an Anthropic
// key: point `memstore serve --model-base-url` at the URL it prints. It
// converses by rule, with the wire format of the tests:
//
//   - "remember X" writes X into notes.md of the first memory store (the
//     mount path read from the system prompt);
//   - "what do you remember?" reads that file back;
//   - "run X" runs the shell command X;
//   - a message with "slow" in it streams a few words and then waits until
//     the request is cancelled (Ctrl-C in the chat);
//   - a tool result is answered with one line about it; anything else is
//     echoed.
package main

import (
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/signal"
	"regexp"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/internal/modeltest"
)

func main() {
	host := &byHand{}
	u := modeltest.New(host)
	u.Otherwise(answer)
	fmt.Printf("upstream: %s (Ctrl-C stops it)\n", u.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	<-sig
	host.close()
}

// byHand is the modeltest.T of a process: failures are logged, cleanups
// run on exit.
type byHand struct{ cleanups []func() }

func (*byHand) Helper()                        {}
func (*byHand) Errorf(format string, a ...any) { log.Printf(format, a...) }
func (*byHand) Fatalf(format string, a ...any) { log.Fatalf(format, a...) }
func (h *byHand) Cleanup(f func())             { h.cleanups = append(h.cleanups, f) }
func (h *byHand) close() {
	for _, f := range h.cleanups {
		f()
	}
}

var mountPath = regexp.MustCompile(`mounted at (\S+)`)

// answer picks the reply to a request from its last message.
func answer(req modeltest.Request) modeltest.Handler {
	usage := func(out string) anthropic.Usage {
		body, _ := json.Marshal(req.Raw)
		return modeltest.Usage(int64(len(body)/4), int64(len(out)/4+1), 0, 0)
	}
	say := func(text string) modeltest.Handler {
		return modeltest.Answer(anthropic.StopReasonEndTurn, usage(text), modeltest.Text(text))
	}
	msgs, _ := req.Raw["messages"].([]any)
	if len(msgs) == 0 {
		return say("Say something.")
	}
	last, _ := msgs[len(msgs)-1].(map[string]any)
	blocks, _ := last["content"].([]any)
	var text string
	for _, b := range blocks {
		b, _ := b.(map[string]any)
		switch b["type"] {
		case "tool_result":
			raw, _ := json.Marshal(b["content"])
			result := strings.TrimSpace(resultText(raw))
			if b["is_error"] == true {
				return say("That did not work: " + result)
			}
			return say("Done — " + firstLine(result))
		case "text":
			text, _ = b["text"].(string)
		}
	}
	var system strings.Builder
	for _, s := range req.Params.System {
		system.WriteString(s.Text)
	}
	mount := "/tmp"
	if m := mountPath.FindStringSubmatch(system.String()); m != nil {
		mount = m[1]
	}
	lower := strings.ToLower(text)
	switch {
	case strings.HasPrefix(lower, "remember "):
		note := strings.TrimSpace(text[len("remember "):])
		input, _ := json.Marshal(map[string]string{"file_path": mount + "/notes.md", "content": note + "\n"})
		return modeltest.Answer(anthropic.StopReasonToolUse, usage(note), modeltest.Text("I'll keep that in "+mount+"/notes.md."),
			modeltest.ToolUse("toolu_write", "write", string(input)))
	case strings.Contains(lower, "what do you remember"):
		input, _ := json.Marshal(map[string]string{"file_path": mount + "/notes.md"})
		return modeltest.Answer(anthropic.StopReasonToolUse, usage(""), modeltest.ToolUse("toolu_read", "read", string(input)))
	case strings.HasPrefix(lower, "run "):
		input, _ := json.Marshal(map[string]string{"command": strings.TrimSpace(text[len("run "):])})
		return modeltest.Answer(anthropic.StopReasonToolUse, usage(""), modeltest.ToolUse("toolu_bash", "bash", string(input)))
	case strings.Contains(lower, "slow"):
		return modeltest.Stall(func() {}, modeltest.Text("Thinking about it"))
	default:
		return say(`You said "` + text + `". Ask me to "remember …", or "what do you remember?"`)
	}
}

// resultText is the text of a tool_result's content (a string or blocks).
func resultText(raw []byte) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct{ Text string }
	json.Unmarshal(raw, &blocks)
	var parts []string
	for _, b := range blocks {
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n")
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
