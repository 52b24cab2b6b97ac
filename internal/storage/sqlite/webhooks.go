package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/webhooks"
)

// emit writes the events evs of a change into the outbox, inside the
// change's transaction q (one tx runs): one event row and one delivery per
// endpoint webhooks.Recipients names. An event nobody receives is not
// stored. A transaction that stored deliveries wakes the dispatchers when
// it commits.
func (s *DB) emit(ctx context.Context, q queryer, evs ...webhooks.Event) error {
	if len(evs) == 0 {
		return nil
	}
	endpoints, err := queryAll(ctx, q, scanEndpoint, `SELECT body, secret FROM webhook_endpoints WHERE state = ?`, webhooks.StateEnabled)
	if err != nil || len(endpoints) == 0 {
		return err
	}
	now := s.now()
	for _, e := range evs {
		to := webhooks.Recipients(endpoints, e.Type)
		if len(to) == 0 {
			continue
		}
		e.ID, e.CreatedAt = ids.NewAt(ids.WebhookEvent, now), now
		if _, err := q.ExecContext(ctx, `INSERT INTO webhook_events (id, type, payload, created_at) VALUES (?, ?, ?, ?)`,
			e.ID, e.Type, string(webhooks.Payload(e)), formatTime(now)); err != nil {
			return fmt.Errorf("webhook outbox: %w", err)
		}
		for _, endpoint := range to {
			if _, err := q.ExecContext(ctx, `INSERT INTO webhook_deliveries (event_id, endpoint_id, order_key, state, created_at, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?)`,
				e.ID, endpoint, e.OrderKey, webhooks.Pending, formatTime(now), formatTime(now)); err != nil {
				return fmt.Errorf("webhook outbox: %w", err)
			}
		}
		s.outbox.Wrote(q)
	}
	return nil
}

// DeliveriesStored implements storage.Webhooks.
func (s *DB) DeliveriesStored() <-chan struct{} { return s.outbox.Stored() }

func scanEndpoint(r rowScanner) (webhooks.Endpoint, error) {
	var (
		e    webhooks.Endpoint
		body string
	)
	if err := r.Scan(&body, &e.Secret); err != nil {
		return e, notFound(err)
	}
	err := json.Unmarshal([]byte(body), &e.WebhookEndpoint)
	return e, err
}

func getEndpoint(ctx context.Context, q queryer, id string) (webhooks.Endpoint, error) {
	return scanEndpoint(q.QueryRowContext(ctx, `SELECT body, secret FROM webhook_endpoints WHERE id = ?`, id))
}

// CreateWebhookEndpoint implements storage.Webhooks.
func (s *DB) CreateWebhookEndpoint(ctx context.Context, e webhooks.Endpoint) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO webhook_endpoints (id, state, body, secret) VALUES (?, ?, ?, ?)`,
		e.ID, e.State, toJSON(e.WebhookEndpoint), e.Secret)
	if err != nil {
		return fmt.Errorf("create webhook endpoint %s: %w", e.ID, err)
	}
	return nil
}

// GetWebhookEndpoint implements storage.Webhooks.
func (s *DB) GetWebhookEndpoint(ctx context.Context, id string) (webhooks.Endpoint, error) {
	return getEndpoint(ctx, s.db, id)
}

// ListWebhookEndpoints implements storage.Webhooks.
func (s *DB) ListWebhookEndpoints(ctx context.Context, q storage.ListQuery) ([]webhooks.Endpoint, error) {
	return queryAll(ctx, s.db, scanEndpoint, `SELECT body, secret FROM webhook_endpoints WHERE (? = '' OR id < ?) ORDER BY id DESC LIMIT ?`,
		q.After, q.After, limitArg(q.Limit))
}

// UpdateWebhookEndpoint implements storage.Webhooks.
func (s *DB) UpdateWebhookEndpoint(ctx context.Context, id string, fn func(*webhooks.Endpoint) error) (webhooks.Endpoint, error) {
	var out webhooks.Endpoint
	err := s.tx(ctx, func(tx *sql.Tx) error {
		e, err := getEndpoint(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := fn(&e); err != nil {
			return err
		}
		e.ID = id
		out = e
		return saveEndpoint(ctx, tx, e)
	})
	return out, err
}

func saveEndpoint(ctx context.Context, q queryer, e webhooks.Endpoint) error {
	_, err := q.ExecContext(ctx, `UPDATE webhook_endpoints SET state = ?, body = ?, secret = ? WHERE id = ?`,
		e.State, toJSON(e.WebhookEndpoint), e.Secret, e.ID)
	return err
}

// DeleteWebhookEndpoint implements storage.Webhooks.
func (s *DB) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM webhook_endpoints WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete webhook endpoint %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return storage.ErrNotFound
	}
	return nil
}

const deliveryColumns = `d.seq, d.event_id, e.type, d.endpoint_id, d.order_key, e.payload, d.state, d.attempts, d.created_at, d.next_attempt_at, d.lease_until, d.lease_token`

func scanDelivery(r rowScanner) (webhooks.Delivery, error) {
	var (
		d                 webhooks.Delivery
		payload, ca, next string
		lease             sql.NullString
	)
	if err := r.Scan(&d.Seq, &d.EventID, &d.EventType, &d.EndpointID, &d.OrderKey, &payload, &d.State, &d.Attempts, &ca, &next, &lease, &d.LeaseToken); err != nil {
		return d, notFound(err)
	}
	d.Payload = []byte(payload)
	var err error
	if d.CreatedAt, err = parseTime(ca); err != nil {
		return d, err
	}
	if d.NextAttemptAt, err = parseTime(next); err != nil {
		return d, err
	}
	d.LeaseUntil, err = nullTime(lease)
	return d, err
}

// claimWindow bounds how many pending deliveries one claim looks at: the
// oldest ones, whose group heads are what Pick may choose.
const claimWindow = 1000

// ClaimDeliveries implements storage.Webhooks. SQLite has one writer at a
// time, so the transaction alone keeps two claims apart.
func (s *DB) ClaimDeliveries(ctx context.Context, now time.Time, limit int, token string, p webhooks.Policy) ([]webhooks.Delivery, error) {
	pendingIn := func(q queryer) ([]webhooks.Delivery, error) {
		return queryAll(ctx, q, scanDelivery, `SELECT `+deliveryColumns+` FROM webhook_deliveries d
			JOIN webhook_events e ON e.id = d.event_id JOIN webhook_endpoints w ON w.id = d.endpoint_id
			WHERE d.state = ? AND w.state = ? ORDER BY d.seq LIMIT ?`, webhooks.Pending, webhooks.StateEnabled, claimWindow)
	}
	// Nothing due is the common answer (the dispatcher also looks every
	// interval): find that out with a read, without taking the write lock
	// the memory writes' group commit needs.
	pending, err := pendingIn(s.db)
	if err != nil || len(webhooks.Pick(pending, now, limit)) == 0 {
		return nil, err
	}
	var out []webhooks.Delivery
	err = s.tx(ctx, func(tx *sql.Tx) error {
		pending, err := pendingIn(tx)
		if err != nil {
			return err
		}
		out = nil
		for _, d := range webhooks.Pick(pending, now, limit) {
			d = p.Claim(d, token, now)
			if _, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET lease_until = ?, lease_token = ? WHERE seq = ?`,
				nullTimeArg(d.LeaseUntil), d.LeaseToken, d.Seq); err != nil {
				return err
			}
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// FinishDeliveries implements storage.Webhooks.
func (s *DB) FinishDeliveries(ctx context.Context, token string, results []webhooks.Result, p webhooks.Policy) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		for _, r := range results {
			if err := finishDelivery(ctx, tx, token, r, p); err != nil {
				return err
			}
		}
		return nil
	})
}

func finishDelivery(ctx context.Context, tx *sql.Tx, token string, r webhooks.Result, p webhooks.Policy) error {
	d, err := scanDelivery(tx.QueryRowContext(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries d
		JOIN webhook_events e ON e.id = d.event_id WHERE d.seq = ?`, r.Seq))
	if errors.Is(err, storage.ErrNotFound) {
		return nil // its endpoint was deleted meanwhile
	}
	if err != nil {
		return err
	}
	if a := r.Attempt; a != nil {
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_attempts (delivery_seq, attempted_at, status_code, latency_ms, response_excerpt, error) VALUES (?, ?, ?, ?, ?, ?)`,
			r.Seq, formatTime(a.AttemptedAt), a.StatusCode, a.LatencyMS, a.ResponseExcerpt, a.Error); err != nil {
			return err
		}
	}
	d, save, disable := p.Finish(d, token, r)
	if !save {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET state = ?, attempts = ?, next_attempt_at = ?, lease_until = ?, lease_token = ? WHERE seq = ?`,
		d.State, d.Attempts, formatTime(d.NextAttemptAt), nullTimeArg(d.LeaseUntil), d.LeaseToken, r.Seq); err != nil {
		return err
	}
	if disable == "" {
		return nil
	}
	e, err := getEndpoint(ctx, tx, d.EndpointID)
	if err != nil {
		return err
	}
	e.Disable(disable, r.Attempt.AttemptedAt)
	return saveEndpoint(ctx, tx, e)
}

// PruneWebhookDeliveries implements storage.Webhooks.
func (s *DB) PruneWebhookDeliveries(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE state != ? AND created_at < ?`, webhooks.Pending, formatTime(before))
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		_, err = tx.ExecContext(ctx, `DELETE FROM webhook_events WHERE created_at < ? AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = webhook_events.id)`, formatTime(before))
		return err
	})
	return n, err
}

// ListWebhookDeliveries implements storage.Webhooks.
func (s *DB) ListWebhookDeliveries(ctx context.Context, endpointID string, q storage.ListQuery) ([]storage.WebhookDelivery, error) {
	if _, err := getEndpoint(ctx, s.db, endpointID); err != nil {
		return nil, err
	}
	var out []storage.WebhookDelivery
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		ds, err := queryAll(ctx, tx, scanDelivery, `SELECT `+deliveryColumns+` FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
			WHERE d.endpoint_id = ? AND (? = '' OR d.seq < (SELECT seq FROM webhook_deliveries WHERE endpoint_id = ? AND event_id = ?))
			ORDER BY d.seq DESC LIMIT ?`, endpointID, q.After, endpointID, q.After, limitArg(q.Limit))
		if err != nil {
			return err
		}
		out = make([]storage.WebhookDelivery, 0, len(ds))
		for _, d := range ds {
			attempts, err := queryAll(ctx, tx, scanAttempt, `SELECT attempted_at, status_code, latency_ms, response_excerpt, error FROM webhook_attempts WHERE delivery_seq = ? ORDER BY rowid`, d.Seq)
			if err != nil {
				return err
			}
			out = append(out, storage.WebhookDelivery{Delivery: d, Attempts: attempts})
		}
		return nil
	})
	return out, err
}

func scanAttempt(r rowScanner) (webhooks.Attempt, error) {
	var (
		a  webhooks.Attempt
		at string
	)
	if err := r.Scan(&at, &a.StatusCode, &a.LatencyMS, &a.ResponseExcerpt, &a.Error); err != nil {
		return a, err
	}
	var err error
	a.AttemptedAt, err = parseTime(at)
	return a, err
}
