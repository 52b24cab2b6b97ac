package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/testenv"
	"github.com/memstore/memstore/internal/webhooks"
)

// appendText appends a user message to the session through db, failing
// the test on an error.
func appendText(t *testing.T, db *postgres.DB, sessionID, text string) {
	t.Helper()
	if _, err := db.AppendEvents(t.Context(), sessionID, []api.Event{api.UserMessage(text)}, nil); err != nil {
		t.Fatalf("append %q: %v", text, err)
	}
}

// logTexts is the session's log as read through db: its user messages'
// texts, checking the sequences and the times strictly increase.
func logTexts(t *testing.T, db *postgres.DB, sessionID string) []string {
	t.Helper()
	evs, err := db.ListEvents(t.Context(), sessionID, storage.EventQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var (
		texts []string
		seq   int64
		at    time.Time
	)
	for _, e := range evs {
		if e.Seq <= seq || e.Event.ProcessedAt == nil || !e.Event.ProcessedAt.After(at) {
			t.Fatalf("event %d at %v follows %d at %v: the log is out of order", e.Seq, e.Event.ProcessedAt, seq, at)
		}
		seq, at = e.Seq, *e.Event.ProcessedAt
		texts = append(texts, e.Event.Text())
	}
	return texts
}

// A server that made a session's last append guesses what the next one
// reads: its batches take one round trip, and the log is as if each had
// read first.
func TestAppendsOnOneServerGuessTheirReads(t *testing.T) {
	db := openOn(t, testenv.PostgresSchema(t))
	db.KeepClockFor(time.Hour)
	sess := idleSession(t, db)
	var want []string
	for i := range 10 {
		text := fmt.Sprint("message ", i)
		appendText(t, db, sess.ID, text)
		want = append(want, text)
	}
	// The first append reads (nothing of the session's row is known
	// yet); the others guess.
	if got := db.GuessedAppendBatches(); got < 9 {
		t.Errorf("%d batches guessed, want the 9 after the first", got)
	}
	if got := logTexts(t, db, sess.ID); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the log holds %q, want %q", got, want)
	}
}

// A guess another server made wrong — it appended, or renamed the session
// — fails its batch's transaction before the COMMIT, and the batch runs
// again reading: the append sees and keeps what the other wrote.
func TestAnAppendGuessedWrongRunsAgainReading(t *testing.T) {
	a, b := twoReplicas(t)
	a.KeepClockFor(time.Hour)
	sess := idleSession(t, a)
	appendText(t, a, sess.ID, "a1")
	appendText(t, a, sess.ID, "a2")
	appendText(t, b, sess.ID, "b1")
	var seen []string
	if _, err := a.AppendEvents(t.Context(), sess.ID, []api.Event{api.UserMessage("a3")}, func(v storage.SessionView) error {
		seen = nil // a guard may be asked again, on the log read
		for _, e := range v.Log {
			seen = append(seen, e.Text())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if a.WrongAppendGuesses() != 1 {
		t.Errorf("%d wrong guesses, want 1 (b's append)", a.WrongAppendGuesses())
	}
	if want := []string{"a1", "a2", "b1"}; fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("the append saw %q, want %q", seen, want)
	}
	if got, want := logTexts(t, b, sess.ID), []string{"a1", "a2", "b1", "a3"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the log holds %q, want %q", got, want)
	}

	a.GuessAgain()
	title := "renamed on b"
	if _, err := b.UpdateSession(t.Context(), sess.ID, func(x *api.Session) error { x.Title = &title; return nil }); err != nil {
		t.Fatal(err)
	}
	appendText(t, a, sess.ID, "a4") // a's cached row is its own, b's rename after it
	if a.WrongAppendGuesses() != 2 {
		t.Errorf("%d wrong guesses, want 2 (b's append, b's rename)", a.WrongAppendGuesses())
	}
	if got, err := b.GetSession(t.Context(), sess.ID); err != nil || got.Title == nil || *got.Title != title {
		t.Fatalf("after the append the session is %+v, %v; want the title %q kept", got, err, title)
	}
}

// What an append reads beside the log is guessed too, and checked: a
// work item stopped meanwhile, or a webhook endpoint enabled, makes the
// guess wrong, and the append run again reading sees them — the step is
// told no live work serves the session, and the status change goes to
// the webhook outbox.
func TestAGuessedAppendSeesWorkStoppedAndEndpointsEnabledMeanwhile(t *testing.T) {
	url := testenv.PostgresSchema(t)
	db := openOn(t, url)
	db.KeepClockFor(time.Hour)
	sess := idleSession(t, db)
	appendText(t, db, sess.ID, "first")
	appendText(t, db, sess.ID, "second")
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if _, err := conn.Exec(t.Context(), `UPDATE work_items SET state = $1 WHERE session_id = $2`, api.WorkStopped, sess.ID); err != nil {
		t.Fatal(err)
	}
	live := true
	if _, err := db.AppendSteps(t.Context(), sess.ID, func(v storage.SessionView, round int) ([]api.Event, error) {
		live = v.WorkLive
		if round > 0 {
			return nil, nil
		}
		return []api.Event{api.UserMessage("third")}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if live {
		t.Error("the append saw live work after its work item was stopped")
	}
	if db.WrongAppendGuesses() != 1 {
		t.Errorf("%d wrong guesses, want 1 (the work stopped)", db.WrongAppendGuesses())
	}

	// The session's work lives again; two appends make its cache's guess
	// one of live work, then an endpoint is enabled.
	if _, err := conn.Exec(t.Context(), `UPDATE work_items SET state = $1 WHERE session_id = $2`, api.WorkQueued, sess.ID); err != nil {
		t.Fatal(err)
	}
	db.GuessAgain()
	appendText(t, db, sess.ID, "fourth")
	appendText(t, db, sess.ID, "fifth")
	now := time.Now().UTC()
	if err := db.CreateWebhookEndpoint(t.Context(), webhooks.Endpoint{WebhookEndpoint: api.WebhookEndpoint{ID: ids.New(ids.Webhook), URL: "https://example.test/",
		State: webhooks.StateEnabled, EnabledEvents: []string{webhooks.SessionStatusRunStarted}, CreatedAt: now, UpdatedAt: now}, Secret: "whsec_c2VjcmV0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.AppendEvents(t.Context(), sess.ID, []api.Event{{Type: api.EventSessionStatusRunning}}, nil); err != nil {
		t.Fatal(err)
	}
	var outbox int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM webhook_events WHERE type = $1`, webhooks.SessionStatusRunStarted).Scan(&outbox); err != nil {
		t.Fatal(err)
	}
	if outbox != 1 {
		t.Errorf("%d webhook events for the run started, want 1", outbox)
	}
	if db.WrongAppendGuesses() != 2 {
		t.Errorf("%d wrong guesses, want 2 (the work stopped, the endpoint)", db.WrongAppendGuesses())
	}
	if got := logTexts(t, db, sess.ID); len(got) != 6 {
		t.Fatalf("the log holds %d events, want 6", len(got))
	}
}
