package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/modeltest"
)

// The model is told which skills it has, what each is for and where its
// SKILL.md is, in the session's working directory where the worker puts
// it. The entries are as the server pins them at session creation.
func TestModelIsToldItsSkills(t *testing.T) {
	u := modeltest.New(t)
	skills := []json.RawMessage{
		json.RawMessage(`{"type":"custom","skill_id":"skill_1","version":"skillver_1","name":"pdf-tools","description":"Fills PDF forms. Use when a task mentions a PDF form."}`),
		json.RawMessage(`{"type":"custom","skill_id":"skill_2","version":"skillver_2","name":"xlsx","description":"Edits spreadsheets."}`),
	}
	h := newHarnessWith(t, api.SessionAgent{Model: api.ModelConfig{ID: model}, System: "You keep notes.", Skills: skills}, nil, claudeConfig(u))
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(10, 5, 0, 0), modeltest.Text("ok"))
	h.mustSend(api.UserMessage("fill the form"))
	h.waitFor("the reply", func(log []api.Event) bool { return strings.Contains(typesOf(log), "agent.message") })

	sys := u.Request(0).Params.System
	if len(sys) != 3 || sys[0].Text != "You keep notes." {
		t.Fatalf("system = %+v; want the agent's, the skills, the memory sections", sys)
	}
	for _, want := range []string{"# Skills", "pdf-tools: Fills PDF forms. Use when a task mentions a PDF form.", "Instructions: skills/pdf-tools/SKILL.md",
		"xlsx: Edits spreadsheets.", "Instructions: skills/xlsx/SKILL.md", "read its SKILL.md first"} {
		if !strings.Contains(sys[1].Text, want) {
			t.Errorf("the skills section lacks %q:\n%s", want, sys[1].Text)
		}
	}
}

// An agent without skills gets no skills section.
func TestNoSkillsNoSection(t *testing.T) {
	if s := skillsSection(nil); s != "" {
		t.Fatalf("skillsSection(nil) = %q", s)
	}
}
