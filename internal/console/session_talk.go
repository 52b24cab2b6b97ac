package console

import (
	"errors"
	"net/http"
	"strings"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// The session page's forms take part in the session as its user would
// through POST /v1/sessions/{id}/events: each form is one event, sent
// through the same service call, so the runtime's rules (a confirmation
// names a call awaiting one, a terminated session takes nothing) refuse
// a console request exactly as they refuse an API request.
func (c *Console) talkRoutes() {
	c.mux.HandleFunc("POST /console/sessions/{session}/messages", c.page(c.talk(messageEvent)))
	c.mux.HandleFunc("POST /console/sessions/{session}/confirmations", c.page(c.talk(confirmationEvent)))
	c.mux.HandleFunc("POST /console/sessions/{session}/custom_results", c.page(c.talk(customResultEvent)))
	c.mux.HandleFunc("POST /console/sessions/{session}/interrupt", c.page(c.talk(interruptEvent)))
}

// talkView is what the session page's forms show: a refusal, and the
// text the person typed, kept for them to fix and send again.
type talkView struct {
	Error   string
	Message string
}

func messageEvent(r *http.Request) (api.Event, error) {
	text := r.PostFormValue("text")
	if strings.TrimSpace(text) == "" {
		return api.Event{}, api.Errorf(api.InvalidRequest, "the message is empty; type what to tell the agent")
	}
	return api.UserMessage(text), nil
}

func confirmationEvent(r *http.Request) (api.Event, error) {
	e := api.Event{Type: api.EventUserToolConfirmation, ToolUseID: r.PostFormValue("tool_use_id"), Result: r.PostFormValue("result")}
	if msg := strings.TrimSpace(r.PostFormValue("deny_message")); msg != "" && e.Result == api.PermissionDeny {
		e.DenyMessage = &msg
	}
	return e, nil
}

func customResultEvent(r *http.Request) (api.Event, error) {
	isError := r.PostFormValue("is_error") == "on"
	e := api.Event{Type: api.EventUserCustomToolResult, CustomToolUseID: r.PostFormValue("custom_tool_use_id"), IsError: &isError}
	if text := r.PostFormValue("text"); text != "" {
		e.Content = []api.ContentBlock{{Type: "text", Text: text}}
	}
	return e, nil
}

func interruptEvent(*http.Request) (api.Event, error) { return api.UserInterrupt(), nil }

// talk sends the event a form makes to the session, attributed to the
// signed-in person, and goes back to the session's page; a refusal is
// shown on that page, with nothing stored and the typed text kept.
func (c *Console) talk(event func(*http.Request) (api.Event, error)) pageHandler {
	return func(w http.ResponseWriter, r *http.Request, q *request) error {
		s, err := c.loadSession(r)
		if err != nil {
			return err
		}
		e, err := event(r)
		if err == nil {
			var sent []api.Event
			sent, err = c.app.Sessions.Send(r.Context(), s.ID, []api.Event{e}, q.Caller())
			if err == nil {
				c.log.InfoContext(r.Context(), "console user sent a session event", "session_id", s.ID, "event_type", e.Type, "event_id", sent[0].ID, "user_id", q.User.ID)
				http.Redirect(w, r, "/console/sessions/"+s.ID+"#talk", http.StatusSeeOther)
				return nil
			}
		}
		if errors.Is(err, storage.ErrNotFound) {
			return notFound("session %s does not exist any more (it was deleted); nothing was sent", s.ID)
		}
		var ae *api.Error
		if !errors.As(err, &ae) {
			return err
		}
		view := talkView{Error: "Nothing was sent: " + ae.Message}
		if e.Type == api.EventUserMessage || e.Type == "" {
			view.Message = r.PostFormValue("text")
		}
		return c.showSession(w, r, q, ae.Type.Status(), s, view)
	}
}

// markPending marks the calls of the log that still await the person: an
// always_ask tool call (built-in or MCP) without its confirmation or
// result, a custom tool call without its result. Their rows carry the forms that answer them.
func markPending(events []eventView) {
	answered := map[string]bool{}
	for _, e := range events {
		switch e.Type {
		case api.EventUserToolConfirmation, api.EventUserToolResult:
			answered[e.ToolUseID] = true
		case api.EventUserCustomToolResult:
			answered[e.CustomToolUseID] = true
		case api.EventAgentMCPToolResult:
			answered[e.MCPToolUseID] = true
		}
	}
	for i, e := range events {
		events[i].Pending = awaitsPerson(e.Event) && !answered[e.ID]
	}
}

// awaitsPerson says whether an event, as it is appended, is a call the
// person answers.
func awaitsPerson(e api.Event) bool {
	return ((e.Type == api.EventAgentToolUse || e.Type == api.EventAgentMCPToolUse) && e.EvaluatedPermission == api.PermissionAsk) || e.Type == api.EventAgentCustomToolUse
}
