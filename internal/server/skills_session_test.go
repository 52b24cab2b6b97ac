package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

// twoVersionSkill uploads skill "pdf-tools" with two versions whose
// SKILL.md bodies differ, and returns it and its first version's id.
func twoVersionSkill(t *testing.T, s *sdkServer) (*anthropic.BetaSkill, string, string) {
	t.Helper()
	ctx := context.Background()
	sk, err := s.client.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{Files: skillFiles(map[string]string{
		"pdf-tools/SKILL.md":        skillMD("pdf-tools", "Fills PDF forms.", "FIRST-VERSION instructions\n"),
		"pdf-tools/scripts/fill.py": "print('v1')\n",
	})})
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.client.Beta.Skills.Versions.New(ctx, sk.ID, anthropic.BetaSkillVersionNewParams{Files: skillFiles(map[string]string{
		"pdf-tools/SKILL.md": skillMD("pdf-tools", "Fills PDF forms.", "SECOND-VERSION instructions\n"),
	})})
	if err != nil {
		t.Fatal(err)
	}
	return sk, sk.LatestVersionID, second.ID
}

func skillEntry(skillID, version string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"type": "custom", "skill_id": skillID, "version": version})
	return b
}

// sessionSkills decodes the skills entries of a session's agent.
func sessionSkills(t *testing.T, sess *api.Session) []map[string]string {
	t.Helper()
	var out []map[string]string
	for _, raw := range sess.Agent.Skills {
		var e map[string]string
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// TestSessionPinsItsSkillVersions: an agent following a skill's latest
// (by "latest" or no version) starts sessions pinned to the version that
// was newest then; a pinned agent keeps its pin; a skill deleted since
// the agent was made refuses the session, which is not created.
func TestSessionPinsItsSkillVersions(t *testing.T) {
	ctx := context.Background()
	s := newSDKServer(t)
	c, err := client.New(s.url, client.WithAPIKey(s.apiKey))
	if err != nil {
		t.Fatal(err)
	}
	sk, first, second := twoVersionSkill(t, s)
	env, err := c.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "pins"})
	if err != nil {
		t.Fatal(err)
	}
	start := func(skills ...json.RawMessage) (*api.Session, error) {
		ag, err := c.CreateAgent(ctx, api.CreateAgentRequest{Name: "a", Model: api.ModelConfig{ID: api.ScriptedModel}, Skills: skills})
		if err != nil {
			t.Fatal(err)
		}
		return c.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: ag.ID}, EnvironmentID: env.ID})
	}
	for _, version := range []string{"latest", ""} {
		sess, err := start(skillEntry(sk.ID, version))
		if err != nil {
			t.Fatal(err)
		}
		if got := sessionSkills(t, sess); len(got) != 1 || got[0]["version"] != second || got[0]["skill_id"] != sk.ID || got[0]["name"] != "pdf-tools" || got[0]["description"] != "Fills PDF forms." {
			t.Fatalf("version %q: the session's agent shows skills %v; want version %s", version, got, second)
		}
		again, err := c.GetSession(ctx, sess.ID)
		if err != nil || sessionSkills(t, again)[0]["version"] != second {
			t.Fatalf("version %q: the session read back shows %v, %v", version, again.Agent.Skills, err)
		}
	}
	pinned, err := start(skillEntry(sk.ID, first))
	if err != nil || sessionSkills(t, pinned)[0]["version"] != first {
		t.Fatalf("a pinned agent's session: %v, %v; want version %s", pinned, err, first)
	}

	// The skill goes; an agent naming it can no longer start sessions.
	ag, err := c.CreateAgent(ctx, api.CreateAgentRequest{Name: "orphan", Model: api.ModelConfig{ID: api.ScriptedModel}, Skills: []json.RawMessage{skillEntry(sk.ID, "")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.Beta.Skills.Delete(ctx, sk.ID, anthropic.BetaSkillDeleteParams{}); err != nil {
		t.Fatal(err)
	}
	before, err := c.ListSessions(ctx, api.SessionListParams{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: ag.ID}, EnvironmentID: env.ID})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Type != api.InvalidRequest || !strings.Contains(ae.Message, sk.ID) || !strings.Contains(ae.Message, "deleted") {
		t.Fatalf("a session of an agent whose skill was deleted: %v; want a 400 naming the skill", err)
	}
	after, err := c.ListSessions(ctx, api.SessionListParams{})
	if err != nil || len(after.Data) != len(before.Data) {
		t.Fatalf("sessions after the refusal: %d, before %d (%v)", len(after.Data), len(before.Data), err)
	}
}

// TestSkillReadsTakeAWorkersCredential: the environment key of an
// environment with a live session of an agent with the skill may read
// and download it, as the official worker does; another environment's key
// may not, nor a key once its session is gone, and none may upload.
func TestSkillReadsTakeAWorkersCredential(t *testing.T) {
	ctx := context.Background()
	s := newSDKServer(t)
	c, err := client.New(s.url, client.WithAPIKey(s.apiKey))
	if err != nil {
		t.Fatal(err)
	}
	sk, first, _ := twoVersionSkill(t, s)
	newEnvKey := func(name string) (*api.Environment, anthropic.Client) {
		env, err := c.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		key, err := c.CreateEnvironmentKey(ctx, env.ID, api.CreateEnvironmentKeyRequest{Name: "worker"})
		if err != nil {
			t.Fatal(err)
		}
		return env, anthropic.NewClient(option.WithBaseURL(s.url), option.WithAuthToken(key.Key), option.WithMaxRetries(0))
	}
	env, withKey := newEnvKey("serving")
	_, otherKey := newEnvKey("other")
	ag, err := c.CreateAgent(ctx, api.CreateAgentRequest{Name: "a", Model: api.ModelConfig{ID: api.ScriptedModel}, Skills: []json.RawMessage{skillEntry(sk.ID, first)}})
	if err != nil {
		t.Fatal(err)
	}

	// No session yet: the key reaches nothing.
	_, err = withKey.Beta.Skills.Versions.Get(ctx, first, anthropic.BetaSkillVersionGetParams{SkillID: sk.ID})
	sdkError(t, err, 403, api.Permission)

	sess, err := c.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: ag.ID}, EnvironmentID: env.ID})
	if err != nil {
		t.Fatal(err)
	}
	v, err := withKey.Beta.Skills.Versions.Get(ctx, first, anthropic.BetaSkillVersionGetParams{SkillID: sk.ID})
	if err != nil || v.ID != first {
		t.Fatalf("the environment key reads the version: %v, %v", v, err)
	}
	if got := download(t, withKey, sk.ID, first); got["pdf-tools/SKILL.md"] == "" || !strings.Contains(got["pdf-tools/SKILL.md"], "FIRST-VERSION") {
		t.Fatalf("the environment key's download = %v", got)
	}
	_, err = otherKey.Beta.Skills.Versions.Download(ctx, first, anthropic.BetaSkillVersionDownloadParams{SkillID: sk.ID})
	if e := sdkError(t, err, 403, api.Permission); !strings.Contains(e.Message, sk.ID) {
		t.Fatalf("another environment's key: %s", e.Message)
	}
	_, err = withKey.Beta.Skills.Versions.New(ctx, sk.ID, anthropic.BetaSkillVersionNewParams{Files: skillFiles(map[string]string{"pdf-tools/SKILL.md": skillMD("pdf-tools", "x", "")})})
	sdkError(t, err, 403, api.Permission)
	if vs, err := s.client.Beta.Skills.Versions.List(ctx, sk.ID, anthropic.BetaSkillVersionListParams{}); err != nil || len(vs.Data) != 2 {
		t.Fatalf("versions after a refused upload: %v, %v; want the two", vs, err)
	}

	if _, err := c.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	_, err = withKey.Beta.Skills.Versions.Get(ctx, first, anthropic.BetaSkillVersionGetParams{SkillID: sk.ID})
	sdkError(t, err, 403, api.Permission)
}

// TestOfficialWorkerBringsAPinnedSkill runs the official SDK's
// EnvironmentWorker against memstore for a session of an agent pinned to
// the first of two versions of a skill: its bash reads
// skills/pdf-tools/SKILL.md of that version from its workdir, and the
// folder is gone once the item is done.
func TestOfficialWorkerBringsAPinnedSkill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the official worker end to end")
	}
	ctx := context.Background()
	s := newSDKServer(t)
	c, err := client.New(s.url, client.WithAPIKey(s.apiKey))
	if err != nil {
		t.Fatal(err)
	}
	sk, first, _ := twoVersionSkill(t, s)
	env, err := c.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "skills"})
	if err != nil {
		t.Fatal(err)
	}
	key, err := c.CreateEnvironmentKey(ctx, env.ID, api.CreateEnvironmentKeyRequest{Name: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := c.CreateAgent(ctx, api.CreateAgentRequest{Name: "forms", Model: api.ModelConfig{ID: api.ScriptedModel}, Skills: []json.RawMessage{skillEntry(sk.ID, first)}})
	if err != nil {
		t.Fatal(err)
	}
	script := `{"tool_calls":[{"name":"bash","input":{"command":"cat skills/pdf-tools/SKILL.md; cat skills/pdf-tools/scripts/fill.py"}}],"end":"terminate"}`
	sess, err := c.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: ag.ID}, EnvironmentID: env.ID,
		InitialEvents: []api.Event{api.UserMessage(script)}})
	if err != nil {
		t.Fatal(err)
	}

	workdir := t.TempDir()
	sdk := anthropic.NewClient(option.WithBaseURL(s.url), option.WithAPIKey("unused"), option.WithMaxRetries(1))
	worker := environments.NewEnvironmentWorker(sdk, environments.EnvironmentWorkerOptions{
		EnvironmentID: env.ID, EnvironmentKey: key.Key, WorkerID: "skills-worker", Workdir: workdir,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	wctx, stop := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- worker.Run(wctx) }()
	defer func() {
		stop()
		if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("worker.Run: %v", err)
		}
	}()
	waitItemStopped(t, c, env.ID, sess.ID)

	summary := agentSummary(t, c, sess.ID)
	for _, want := range []string{"1 tool call(s), 0 failed", "FIRST-VERSION instructions", "print('v1')"} {
		if !strings.Contains(summary, want) {
			t.Fatalf("the agent's bash did not read the first version (%q missing):\n%s", want, summary)
		}
	}
	if strings.Contains(summary, "SECOND-VERSION") {
		t.Fatalf("the agent read the second version:\n%s", summary)
	}
	if _, err := os.Lstat(filepath.Join(workdir, "skills", "pdf-tools")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the skill's folder is still there after the session (%v)", err)
	}
}

// waitStopped waits until the environment's one work item is stopped.
func waitItemStopped(t *testing.T, c *client.Client, envID, sessionID string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for {
		page, err := c.ListWork(ctx, envID, api.WorkListParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) == 1 && page.Data[0].State == api.WorkStopped {
			return
		}
		if time.Now().After(deadline) {
			evs, _ := c.ListEvents(ctx, sessionID, api.EventListParams{Limit: 1000})
			t.Fatalf("the worker did not finish the session; work = %+v\nevents: %+v", page.Data, evs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// agentSummary is the scripted agent's closing message.
func agentSummary(t *testing.T, c *client.Client, sessionID string) string {
	t.Helper()
	evs, err := c.ListEvents(context.Background(), sessionID, api.EventListParams{Limit: 1000, Types: []string{api.EventAgentMessage}})
	if err != nil || len(evs.Data) != 1 {
		t.Fatalf("agent messages = %+v, %v", evs, err)
	}
	return evs.Data[0].Text()
}
