package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
)

// agentSessionsShown is how many of an agent's newest sessions its page
// lists; the sessions list filtered by the agent has the rest.
const agentSessionsShown = 20

// Permission policies of the built-in toolset, as the agent's tools name
// them.
const (
	policyAllow = "always_allow"
	policyAsk   = "always_ask"
)

func (c *Console) agentRoutes() {
	c.mux.HandleFunc("GET /console/agents", c.page(c.agentsPage))
	c.mux.HandleFunc("POST /console/agents", c.page(c.createAgent))
	c.mux.HandleFunc("GET /console/agents/new", c.page(c.newAgentPage))
	c.mux.HandleFunc("GET /console/agents/{agent}", c.page(c.agentPage))
	c.mux.HandleFunc("POST /console/agents/{agent}", c.page(c.updateAgent))
	c.mux.HandleFunc("POST /console/agents/{agent}/archive", c.page(c.archiveAgent))
	c.mux.HandleFunc("POST /console/agents/{agent}/sessions", c.page(c.startSession))
}

// agentsPage lists agents newest first, a page at a time; with a name
// filter it reads on, like the environments list, until a page of
// matches or the end, and its paging link keeps the filter.
func (c *Console) agentsPage(w http.ResponseWriter, r *http.Request, q *request) error {
	name := strings.TrimSpace(r.URL.Query().Get("name"))
	query := storage.ListQuery{Limit: api.MaxListLimit, IncludeArchived: true, After: r.URL.Query().Get("after")}
	if query.After != "" && !ids.Valid(ids.Agent, query.After) {
		return badRequest("this page link is not valid any more; start from the first page")
	}
	var shown []api.Agent
	next := ""
	for {
		agents, err := c.store.ListAgents(r.Context(), query)
		if err != nil {
			return err
		}
		for i, a := range agents {
			if name == "" || strings.Contains(strings.ToLower(a.Name), strings.ToLower(name)) {
				shown = append(shown, a)
			}
			if len(shown) == api.MaxListLimit && (i < len(agents)-1 || len(agents) == query.Limit) {
				next = a.ID
				break
			}
		}
		if next != "" || len(agents) < query.Limit {
			break
		}
		query.After = agents[len(agents)-1].ID
	}
	return c.render(w, r, q, http.StatusOK, "agents", "Agents", struct {
		Agents     []api.Agent
		Next, Name string
	}{shown, next, name})
}

// newAgentPage shows the form that creates an agent.
func (c *Console) newAgentPage(w http.ResponseWriter, r *http.Request, q *request) error {
	return c.showNewAgent(w, r, q, http.StatusOK, agentForm{Model: api.ScriptedModel, Toolset: true, Policy: policyAllow}, "")
}

func (c *Console) showNewAgent(w http.ResponseWriter, r *http.Request, q *request, status int, form agentForm, formErr string) error {
	form.fillTools()
	return c.render(w, r, q, status, "agent", "New agent", agentView{Form: form, Error: formErr})
}

// createAgent makes an agent from the form, under the API's rules.
func (c *Console) createAgent(w http.ResponseWriter, r *http.Request, q *request) error {
	form := readAgentForm(r)
	tools, skills, err := form.build()
	if err == nil {
		var a api.Agent
		a, err = c.app.Agents.Create(r.Context(), api.CreateAgentRequest{Name: form.Name, Model: api.ModelConfig{ID: form.Model},
			Description: &form.Description, System: &form.System, Tools: tools, Skills: skills}, q.Caller())
		if err == nil {
			http.Redirect(w, r, "/console/agents/"+a.ID, http.StatusSeeOther)
			return nil
		}
	}
	if msg := invalid(err); msg != "" {
		return c.showNewAgent(w, r, q, http.StatusBadRequest, form, "Nothing was created: "+msg)
	}
	return err
}

// agentView is one agent's page: its definition, the form that edits it,
// its sessions and the form that starts one.
type agentView struct {
	Agent    api.Agent
	Tools    string
	Form     agentForm
	Sessions []api.Session
	// Environments and Stores are what a new session may use.
	Environments []storage.Environment
	Stores       []storage.MemoryStoreRow
	Start        startForm
	Error        string
	// StartError is a refused start, shown beside its form.
	StartError string
}

// startForm is what the new-session form was sent with.
type startForm struct {
	Environment, Title, Message string
	Access                      map[string]string
}

func (c *Console) loadAgent(r *http.Request) (api.Agent, error) {
	id := r.PathValue("agent")
	if !ids.Valid(ids.Agent, id) {
		return api.Agent{}, notFound("%q is not an agent id; pick an agent from the list", id)
	}
	a, err := c.store.GetAgent(r.Context(), id)
	if errors.Is(err, storage.ErrNotFound) {
		return a, notFound("agent %s does not exist; pick an agent from the list", id)
	}
	return a, err
}

func (c *Console) agentPage(w http.ResponseWriter, r *http.Request, q *request) error {
	a, err := c.loadAgent(r)
	if err != nil {
		return err
	}
	return c.showAgent(w, r, q, http.StatusOK, agentView{Agent: a, Form: formOf(a)})
}

func (c *Console) showAgent(w http.ResponseWriter, r *http.Request, q *request, status int, v agentView) error {
	ctx := r.Context()
	var err error
	if v.Sessions, err = c.store.ListSessions(ctx, storage.SessionQuery{ListQuery: storage.ListQuery{Limit: agentSessionsShown, IncludeArchived: true}, AgentID: v.Agent.ID}); err != nil {
		return err
	}
	if v.Environments, err = c.store.ListEnvironments(ctx, storage.ListQuery{Limit: api.MaxListLimit}); err != nil {
		return err
	}
	stores, err := c.store.ListMemoryStores(ctx, storage.MemoryStoreQuery{Limit: api.MaxListLimit})
	if err != nil {
		return err
	}
	v.Stores = stores.Items
	v.Tools = readableJSON(mustJSON(v.Agent.Tools))
	v.Form.fillTools()
	return c.render(w, r, q, status, "agent", "Agent "+v.Agent.Name, v)
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// updateAgent makes the agent's next version from the form, refused when
// someone changed it since the form was shown.
func (c *Console) updateAgent(w http.ResponseWriter, r *http.Request, q *request) error {
	a, err := c.loadAgent(r)
	if err != nil {
		return err
	}
	form := readAgentForm(r)
	tools, skills, err := form.build()
	if err == nil {
		model := a.Model
		if model.ID != form.Model {
			model = api.ModelConfig{ID: form.Model}
		}
		_, err = c.app.Agents.Update(r.Context(), a.ID, api.UpdateAgentRequest{Version: form.Version, Name: &form.Name, Model: &model,
			Description: &form.Description, System: &form.System, Tools: &tools, Skills: &skills}, q.Caller())
		if err == nil {
			http.Redirect(w, r, "/console/agents/"+a.ID, http.StatusSeeOther)
			return nil
		}
	}
	if msg := invalid(err); msg != "" {
		status := http.StatusBadRequest
		var ae *api.Error
		if errors.As(err, &ae) && ae.Type == api.Conflict {
			status = http.StatusConflict
		}
		return c.showAgent(w, r, q, status, agentView{Agent: a, Form: form, Error: "Nothing was changed: " + msg})
	}
	return err
}

func (c *Console) archiveAgent(w http.ResponseWriter, r *http.Request, q *request) error {
	a, err := c.loadAgent(r)
	if err != nil {
		return err
	}
	if _, err := c.app.Agents.Archive(r.Context(), a.ID, q.Caller()); err != nil {
		return err
	}
	http.Redirect(w, r, "/console/agents/"+a.ID, http.StatusSeeOther)
	return nil
}

// startSession starts a session of the agent in the chosen environment,
// with the chosen stores at the chosen access, and opens its page.
func (c *Console) startSession(w http.ResponseWriter, r *http.Request, q *request) error {
	a, err := c.loadAgent(r)
	if err != nil {
		return err
	}
	if err := r.ParseForm(); err != nil {
		return badRequest("the form could not be read: %v", err)
	}
	start := startForm{Environment: r.PostFormValue("environment"), Title: strings.TrimSpace(r.PostFormValue("title")), Message: r.PostFormValue("message"), Access: map[string]string{}}
	req := api.CreateSessionRequest{Agent: api.AgentRef{ID: a.ID}, EnvironmentID: start.Environment}
	if start.Title != "" {
		req.Title = &start.Title
	}
	// Stores in the order the form listed them.
	for _, id := range r.PostForm["store"] {
		access := r.PostFormValue("access_" + id)
		if access == "" {
			continue
		}
		start.Access[id] = access
		req.Resources = append(req.Resources, api.SessionResourceParams{Type: "memory_store", MemoryStoreID: id, Access: access})
	}
	if strings.TrimSpace(start.Message) != "" {
		req.InitialEvents = []api.Event{api.UserMessage(start.Message)}
	}
	sess, err := c.app.Sessions.Create(r.Context(), req, c.cfg.MountPrefix, q.Caller())
	if msg := invalid(err); msg != "" {
		return c.showAgent(w, r, q, http.StatusBadRequest, agentView{Agent: a, Form: formOf(a), Start: start, StartError: "No session was started: " + msg})
	}
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/console/sessions/"+sess.ID, http.StatusSeeOther)
	return nil
}

// agentForm is the agent form's fields: the built-in toolset and custom
// tools as fields a person fills, any other tool entry (an MCP toolset, a
// toolset with settings the fields do not show) as JSON kept as written.
type agentForm struct {
	Version                          int64
	Name, Description, Model, System string
	// Toolset gives the agent the built-in tools, each asked about first
	// when Policy is always_ask.
	Toolset bool
	Policy  string
	// Tools are the built-in tools, each enabled or not and with its own
	// policy ("" follows Policy).
	Tools  []toolRow
	Custom []customRow
	// Other and Skills are JSON arrays.
	Other, Skills string
}

type toolRow struct {
	Name    string
	Enabled bool
	Policy  string
}

type customRow struct {
	Name, Description, Schema string
}

// fillTools lists every built-in tool in the form, and one empty custom
// tool row to add a tool with.
func (f *agentForm) fillTools() {
	var rows []toolRow
	for _, d := range api.AgentTools() {
		row := toolRow{Name: d.Name, Enabled: true}
		if i := slices.IndexFunc(f.Tools, func(t toolRow) bool { return t.Name == d.Name }); i >= 0 {
			row = f.Tools[i]
		}
		rows = append(rows, row)
	}
	f.Tools = rows
	f.Custom = append(f.Custom, customRow{})
}

// toolsetEntry is an agent_toolset_20260401 entry as the form edits it.
type toolsetEntry struct {
	Type          string        `json:"type"`
	DefaultConfig *toolConfig   `json:"default_config,omitempty"`
	Configs       []namedConfig `json:"configs,omitempty"`
}

type toolConfig struct {
	Enabled          *bool   `json:"enabled,omitempty"`
	PermissionPolicy *policy `json:"permission_policy,omitempty"`
}

type namedConfig struct {
	Name string `json:"name"`
	toolConfig
}

type policy struct {
	Type string `json:"type"`
}

type customEntry struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// formOf shows an agent in the form. A tools entry the fields cannot hold
// exactly goes to Other, unchanged.
func formOf(a api.Agent) agentForm {
	f := agentForm{Version: a.Version, Name: a.Name, Description: a.Description, Model: a.Model.ID, System: a.System, Policy: policyAllow}
	var other []json.RawMessage
	for _, raw := range a.Tools {
		if !f.Toolset {
			var ts toolsetEntry
			if strictDecode(raw, &ts) == nil && ts.Type == api.AgentToolsetType && (ts.DefaultConfig == nil || ts.DefaultConfig.Enabled == nil) {
				f.Toolset = true
				if ts.DefaultConfig != nil && ts.DefaultConfig.PermissionPolicy != nil {
					f.Policy = ts.DefaultConfig.PermissionPolicy.Type
				}
				for _, c := range ts.Configs {
					row := toolRow{Name: c.Name, Enabled: c.Enabled == nil || *c.Enabled}
					if c.PermissionPolicy != nil {
						row.Policy = c.PermissionPolicy.Type
					}
					f.Tools = append(f.Tools, row)
				}
				continue
			}
		}
		var ct customEntry
		if strictDecode(raw, &ct) == nil && ct.Type == "custom" {
			f.Custom = append(f.Custom, customRow{Name: ct.Name, Description: ct.Description, Schema: readableJSON(ct.InputSchema)})
			continue
		}
		other = append(other, raw)
	}
	if len(other) > 0 {
		f.Other = readableJSON(mustJSON(other))
	}
	if len(a.Skills) > 0 {
		f.Skills = readableJSON(mustJSON(a.Skills))
	}
	return f
}

// strictDecode decodes raw into v, refusing fields v does not have.
func strictDecode(raw json.RawMessage, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

func readAgentForm(r *http.Request) agentForm {
	r.ParseForm()
	f := agentForm{
		Name: strings.TrimSpace(r.PostFormValue("name")), Description: r.PostFormValue("description"),
		Model: strings.TrimSpace(r.PostFormValue("model")), System: r.PostFormValue("system"),
		Toolset: r.PostFormValue("toolset") == "on", Policy: r.PostFormValue("policy"),
		Other: r.PostFormValue("other_tools"), Skills: r.PostFormValue("skills"),
	}
	fmt.Sscan(r.PostFormValue("version"), &f.Version)
	for _, d := range api.AgentTools() {
		f.Tools = append(f.Tools, toolRow{Name: d.Name, Enabled: r.PostFormValue("enabled_"+d.Name) == "on", Policy: r.PostFormValue("policy_" + d.Name)})
	}
	names, descs, schemas := r.PostForm["custom_name"], r.PostForm["custom_description"], r.PostForm["custom_schema"]
	for i, name := range names {
		row := customRow{Name: strings.TrimSpace(name)}
		if i < len(descs) {
			row.Description = descs[i]
		}
		if i < len(schemas) {
			row.Schema = schemas[i]
		}
		if row.Name != "" || strings.TrimSpace(row.Description) != "" || strings.TrimSpace(row.Schema) != "" {
			f.Custom = append(f.Custom, row)
		}
	}
	return f
}

// build turns the form into the agent's tools and skills. What only the
// form can get wrong (JSON that does not parse, a policy that is not one)
// is refused here; everything else is the API's to judge.
func (f agentForm) build() (tools, skills []json.RawMessage, err error) {
	tools = []json.RawMessage{}
	if f.Toolset {
		ts := toolsetEntry{Type: api.AgentToolsetType}
		if err := checkPolicy("the built-in tools' permission", f.Policy, false); err != nil {
			return nil, nil, err
		}
		ts.DefaultConfig = &toolConfig{PermissionPolicy: &policy{Type: f.Policy}}
		for _, t := range f.Tools {
			if err := checkPolicy("the permission of "+t.Name, t.Policy, true); err != nil {
				return nil, nil, err
			}
			if t.Enabled && t.Policy == "" {
				continue
			}
			c := namedConfig{Name: t.Name}
			if !t.Enabled {
				c.Enabled = new(bool)
			}
			if t.Policy != "" {
				c.PermissionPolicy = &policy{Type: t.Policy}
			}
			ts.Configs = append(ts.Configs, c)
		}
		tools = append(tools, mustJSON(ts))
	}
	for _, ct := range f.Custom {
		if ct.Name == "" {
			return nil, nil, api.Errorf(api.InvalidRequest, "a custom tool needs a name (the name the model calls it by); fill it in or clear the row")
		}
		schema := json.RawMessage(`{"type":"object","properties":{}}`)
		if s := strings.TrimSpace(ct.Schema); s != "" {
			if !json.Valid([]byte(s)) || s[0] != '{' {
				return nil, nil, api.Errorf(api.InvalidRequest, "the input schema of custom tool %q is not a JSON object; write a JSON Schema such as {\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}", ct.Name)
			}
			schema = json.RawMessage(s)
		}
		tools = append(tools, mustJSON(customEntry{Type: "custom", Name: ct.Name, Description: ct.Description, InputSchema: schema}))
	}
	other, err := jsonArray("other tools", f.Other)
	if err != nil {
		return nil, nil, err
	}
	if skills, err = jsonArray("skills", f.Skills); err != nil {
		return nil, nil, err
	}
	return append(tools, other...), skills, nil
}

func checkPolicy(what, p string, orDefault bool) error {
	if p == policyAllow || p == policyAsk || (orDefault && p == "") {
		return nil
	}
	return api.Errorf(api.InvalidRequest, "%s is %q; pick %s or %s", what, p, policyAllow, policyAsk)
}

// jsonArray reads a form field holding a JSON array ("" is none).
func jsonArray(field, text string) ([]json.RawMessage, error) {
	out := []json.RawMessage{}
	if strings.TrimSpace(text) == "" {
		return out, nil
	}
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		return nil, api.Errorf(api.InvalidRequest, "%s must be a JSON array of objects, like [{\"type\":\"…\"}]; it does not parse: %v", field, err)
	}
	return out, nil
}
