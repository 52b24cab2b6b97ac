package webhooks

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
)

func TestTypesAreSortedAndChecked(t *testing.T) {
	if !slices.IsSorted(Types) {
		t.Fatalf("Types is not sorted: %q", Types)
	}
	for _, c := range []struct {
		types []string
		want  string // "" accepted, else a part of the error
	}{
		{[]string{SessionStatusRunStarted}, ""},
		{Types, ""},
		{nil, "at least one"},
		{[]string{}, "at least one"},
		{[]string{"vault.created"}, `unknown event type "vault.created"; valid types: agent.archived`},
		{[]string{SessionCreated, "session.created "}, "unknown event type"},
	} {
		err := CheckTypes(c.types)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("CheckTypes(%q) = %v, want %q", c.types, err, c.want)
		}
	}
}

func TestSessionEvents(t *testing.T) {
	for _, c := range []struct {
		name string
		e    api.Event
		want []string
	}{
		{"running", api.Event{Type: api.EventSessionStatusRunning}, []string{SessionStatusRunStarted}},
		{"idle at end of turn", api.Event{Type: api.EventSessionStatusIdle, StopReason: &api.StopReason{Type: api.StopEndTurn}}, []string{SessionStatusIdled}},
		{"idle needing action", api.Event{Type: api.EventSessionStatusIdle, StopReason: &api.StopReason{Type: api.StopRequiresAction}}, []string{SessionStatusIdled, SessionRequiresAction}},
		{"terminated", api.Event{Type: api.EventSessionStatusTerminated}, []string{SessionStatusTerminated}},
		{"rescheduled", api.Event{Type: "session.status_rescheduled"}, []string{SessionStatusRescheduled}},
		{"a message", api.Event{Type: api.EventAgentMessage}, nil},
	} {
		var got []string
		for _, ev := range ForSessionEvent("sesn_1", c.e) {
			if ev.ObjectID != "sesn_1" || ev.OrderKey != "sesn_1" {
				t.Errorf("%s: event %+v not about and ordered by the session", c.name, ev)
			}
			got = append(got, ev.Type)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if got := ForUpdate(AgentUpdated, AgentArchived, "agent_1", false, true).Type; got != AgentArchived {
		t.Errorf("archiving = %s", got)
	}
	if got := ForUpdate(AgentUpdated, AgentArchived, "agent_1", true, true).Type; got != AgentUpdated {
		t.Errorf("updating an archived object = %s", got)
	}
}

func TestRecipients(t *testing.T) {
	ep := func(id, state string, types ...string) Endpoint {
		return Endpoint{WebhookEndpoint: api.WebhookEndpoint{ID: id, State: state, EnabledEvents: types}}
	}
	eps := []Endpoint{
		ep("a", StateEnabled, SessionCreated),
		ep("b", StateDisabled, SessionCreated),
		ep("c", StateEnabled, SessionDeleted, SessionCreated),
		ep("d", StateEnabled, SessionDeleted),
	}
	if got := Recipients(eps, SessionCreated); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("recipients = %q", got)
	}
}

func TestBackoffDoublesUpToItsCap(t *testing.T) {
	p := Policy{FirstBackoff: time.Second, MaxBackoff: 10 * time.Second}.WithDefaults()
	var got []time.Duration
	for n := 1; n <= 6; n++ {
		got = append(got, p.Backoff(n))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("backoff = %v, want %v", got, want)
	}
	if p.Backoff(1000) != 10*time.Second {
		t.Fatal("a long run of failures overflows the cap")
	}
}

func TestPickSendsOnlyEachGroupsDueUnleasedHead(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	later, past := now.Add(time.Minute), now.Add(-time.Minute)
	d := func(seq int64, endpoint, key string, due time.Time, lease *time.Time) Delivery {
		return Delivery{Seq: seq, EndpointID: endpoint, OrderKey: key, NextAttemptAt: due, LeaseUntil: lease}
	}
	pending := []Delivery{
		d(1, "e1", "s1", now, nil),    // head of e1/s1: due
		d(2, "e1", "s1", now, nil),    // behind it
		d(3, "e1", "s2", later, nil),  // head of e1/s2: not due, holds back 4
		d(4, "e1", "s2", now, nil),    //
		d(5, "e2", "s1", now, &later), // head of e2/s1: leased
		d(6, "e2", "s1", now, nil),    //
		d(7, "e2", "s3", past, &past), // head of e2/s3: lease lapsed, due
		d(8, "e3", "s4", now, nil),    // head of e3/s4
	}
	var seqs []int64
	for _, x := range Pick(pending, now, 10) {
		seqs = append(seqs, x.Seq)
	}
	if !slices.Equal(seqs, []int64{1, 7, 8}) {
		t.Fatalf("picked %v, want [1 7 8]", seqs)
	}
	if got := Pick(pending, now, 2); len(got) != 2 || got[1].Seq != 7 {
		t.Fatalf("limit 2 picked %+v", got)
	}
}

func TestAfterAttempt(t *testing.T) {
	p := Policy{FirstBackoff: time.Second, MaxBackoff: time.Minute, RetryFor: 10 * time.Second}.WithDefaults()
	created := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	lease := created.Add(time.Minute)
	d := Delivery{EventID: "wevt_1", State: Pending, CreatedAt: created, LeaseUntil: &lease, LeaseToken: "t"}

	ok, disable := p.AfterAttempt(d, Attempt{AttemptedAt: created, StatusCode: 204})
	if ok.State != Delivered || ok.Attempts != 1 || ok.LeaseUntil != nil || ok.LeaseToken != "" || disable != "" {
		t.Fatalf("a 2xx settles to %+v, %q", ok, disable)
	}
	retry, disable := p.AfterAttempt(d, Attempt{AttemptedAt: created.Add(2 * time.Second), StatusCode: 502})
	if retry.State != Pending || !retry.NextAttemptAt.Equal(created.Add(3*time.Second)) || disable != "" {
		t.Fatalf("a 502 settles to %+v, %q", retry, disable)
	}
	d.Attempts = 3 // the next wait is 8 s: past the 10 s window from 5 s on
	failed, disable := p.AfterAttempt(d, Attempt{AttemptedAt: created.Add(5 * time.Second), Error: "connection refused"})
	if failed.State != Failed || !strings.Contains(disable, "wevt_1") || !strings.Contains(disable, "connection refused") || !strings.Contains(disable, "set state to enabled") {
		t.Fatalf("past the window: %+v, %q", failed, disable)
	}
}

func TestFinish(t *testing.T) {
	p := Policy{FirstBackoff: time.Second, RetryFor: 10 * time.Second}.WithDefaults()
	created := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	lease := created.Add(time.Minute)
	held := Delivery{EventID: "wevt_1", State: Pending, CreatedAt: created, NextAttemptAt: created, LeaseUntil: &lease, LeaseToken: "t"}
	ok := &Attempt{AttemptedAt: created, StatusCode: 200}

	if next, save, _ := p.Finish(held, "t", Result{Attempt: ok}); !save || next.State != Delivered || next.Attempts != 1 {
		t.Fatalf("the lease holder's 2xx: %+v, save %v", next, save)
	}
	if _, save, _ := p.Finish(held, "other", Result{Attempt: ok}); save {
		t.Fatal("a dispatcher whose lease lapsed settled the delivery")
	}
	delivered := held
	delivered.State = Delivered
	if _, save, _ := p.Finish(delivered, "t", Result{Attempt: ok}); save {
		t.Fatal("a settled delivery was settled again")
	}
	back, save, disable := p.Finish(held, "t", Result{})
	if !save || back.State != Pending || back.Attempts != 0 || back.LeaseUntil != nil || back.LeaseToken != "" || !back.NextAttemptAt.Equal(created) || disable != "" {
		t.Fatalf("a delivery given back: %+v, save %v, disable %q", back, save, disable)
	}
	past := held
	past.Attempts = 5
	if _, _, disable := p.Finish(past, "t", Result{Attempt: &Attempt{AttemptedAt: created.Add(9 * time.Second), StatusCode: 500}}); disable == "" {
		t.Fatal("a failure past the retry window does not disable the endpoint")
	}
}
