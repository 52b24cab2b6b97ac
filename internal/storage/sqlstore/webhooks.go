package sqlstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/webhooks"
)

// emit writes the events evs of a change into the outbox, inside the
// change's transaction: one event row and one delivery per endpoint
// webhooks.Recipients names. An event nobody receives is not stored. A
// transaction that stored deliveries wakes the dispatchers when it
// commits.
func (t *tx) emit(ctx context.Context, evs ...webhooks.Event) error {
	if len(evs) == 0 || t.after.noEndpoints {
		return nil
	}
	endpoints, err := queryAll(ctx, t, scanEndpoint, `SELECT body, secret FROM webhook_endpoints WHERE state = ?`, webhooks.StateEnabled)
	if err != nil || len(endpoints) == 0 {
		return err
	}
	now, err := t.s.b.Now(ctx, t)
	if err != nil {
		return err
	}
	for _, e := range evs {
		to := webhooks.Recipients(endpoints, e.Type)
		if len(to) == 0 {
			continue
		}
		e.ID, e.CreatedAt = ids.NewAt(ids.WebhookEvent, now), now
		if _, err := t.Exec(ctx, `INSERT INTO webhook_events (id, type, payload, created_at) VALUES (?, ?, ?, ?)`,
			e.ID, e.Type, string(webhooks.Payload(e)), now); err != nil {
			return fmt.Errorf("webhook outbox: %w", err)
		}
		for _, endpoint := range to {
			if _, err := t.Exec(ctx, `INSERT INTO webhook_deliveries (event_id, endpoint_id, order_key, state, created_at, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?)`,
				e.ID, endpoint, e.OrderKey, webhooks.Pending, now, now); err != nil {
				return fmt.Errorf("webhook outbox: %w", err)
			}
		}
		t.s.outbox.Wrote(t)
	}
	return nil
}

// DeliveriesStored implements storage.Webhooks. Only this handle's
// transactions count: the server that made a change sends its webhooks,
// and the others' dispatchers find any left over on their interval.
func (s *Store) DeliveriesStored() <-chan struct{} { return s.outbox.Stored() }

func scanEndpoint(r Row) (webhooks.Endpoint, error) {
	var (
		e    webhooks.Endpoint
		body string
	)
	if err := r.Scan(&body, &e.Secret); err != nil {
		return e, err
	}
	err := json.Unmarshal([]byte(body), &e.WebhookEndpoint)
	return e, err
}

func (s *Store) getEndpoint(ctx context.Context, q Conn, id string, lock bool) (webhooks.Endpoint, error) {
	return scanEndpoint(q.QueryRow(ctx, `SELECT body, secret FROM webhook_endpoints WHERE id = ?`+s.lock(lock), id))
}

func saveEndpoint(ctx context.Context, q Conn, e webhooks.Endpoint) error {
	_, err := q.Exec(ctx, `UPDATE webhook_endpoints SET state = ?, body = ?, secret = ? WHERE id = ?`,
		e.State, toJSON(e.WebhookEndpoint), e.Secret, e.ID)
	return err
}

// CreateWebhookEndpoint implements storage.Webhooks.
func (s *Store) CreateWebhookEndpoint(ctx context.Context, e webhooks.Endpoint) error {
	_, err := s.db().Exec(ctx, `INSERT INTO webhook_endpoints (id, state, body, secret) VALUES (?, ?, ?, ?)`,
		e.ID, e.State, toJSON(e.WebhookEndpoint), e.Secret)
	if err != nil {
		return fmt.Errorf("create webhook endpoint %s: %w", e.ID, err)
	}
	return nil
}

// GetWebhookEndpoint implements storage.Webhooks.
func (s *Store) GetWebhookEndpoint(ctx context.Context, id string) (webhooks.Endpoint, error) {
	return s.getEndpoint(ctx, s.db(), id, false)
}

// ListWebhookEndpoints implements storage.Webhooks.
func (s *Store) ListWebhookEndpoints(ctx context.Context, q storage.ListQuery) ([]webhooks.Endpoint, error) {
	return queryAll(ctx, s.db(), scanEndpoint, `SELECT body, secret FROM webhook_endpoints WHERE (? = '' OR id < ?) ORDER BY id DESC LIMIT ?`,
		q.After, q.After, limitArg(q.Limit))
}

// UpdateWebhookEndpoint implements storage.Webhooks.
func (s *Store) UpdateWebhookEndpoint(ctx context.Context, id string, fn func(*webhooks.Endpoint) error) (webhooks.Endpoint, error) {
	var out webhooks.Endpoint
	err := s.write(ctx, func(tx *tx) error {
		e, err := s.getEndpoint(ctx, tx, id, true)
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

// DeleteWebhookEndpoint implements storage.Webhooks.
func (s *Store) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	n, err := s.db().Exec(ctx, `DELETE FROM webhook_endpoints WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete webhook endpoint %s: %w", id, err)
	}
	if n == 0 {
		return storage.ErrNotFound
	}
	return nil
}

const deliveryColumns = `d.seq, d.event_id, e.type, d.endpoint_id, d.order_key, e.payload, d.state, d.attempts, d.created_at, d.next_attempt_at, d.lease_until, d.lease_token`

func scanDelivery(r Row) (webhooks.Delivery, error) {
	var (
		d       webhooks.Delivery
		payload string
	)
	if err := r.Scan(&d.Seq, &d.EventID, &d.EventType, &d.EndpointID, &d.OrderKey, &payload, &d.State, &d.Attempts, &d.CreatedAt, &d.NextAttemptAt, &d.LeaseUntil, &d.LeaseToken); err != nil {
		return d, err
	}
	d.Payload = []byte(payload)
	return d, nil
}

// claimWindow bounds how many pending deliveries one claim looks at: the
// oldest ones, whose group heads are what Pick may choose.
const claimWindow = 1000

// ClaimDeliveries implements storage.Webhooks. The claim locks the pending
// rows it reads (not skipping locked ones: skipping a locked head would
// let its successor overtake it), so the claims of several servers run one
// after the other and each sees the leases the previous one took.
func (s *Store) ClaimDeliveries(ctx context.Context, now time.Time, limit int, token string, p webhooks.Policy) ([]webhooks.Delivery, error) {
	pendingIn := func(q Conn, lock string) ([]webhooks.Delivery, error) {
		return queryAll(ctx, q, scanDelivery, `SELECT `+deliveryColumns+` FROM webhook_deliveries d
			JOIN webhook_events e ON e.id = d.event_id JOIN webhook_endpoints w ON w.id = d.endpoint_id
			WHERE d.state = ? AND w.state = ? ORDER BY d.seq LIMIT ?`+lock, webhooks.Pending, webhooks.StateEnabled, claimWindow)
	}
	if s.d.SingleWriter {
		pending, err := pendingIn(s.db(), "")
		if err != nil || len(webhooks.Pick(pending, now, limit)) == 0 {
			return nil, err
		}
	}
	var out []webhooks.Delivery
	err := s.write(ctx, func(tx *tx) error {
		pending, err := pendingIn(tx, s.lockDeliveries())
		if err != nil {
			return err
		}
		out = nil
		for _, d := range webhooks.Pick(pending, now, limit) {
			d = p.Claim(d, token, now)
			if _, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET lease_until = ?, lease_token = ? WHERE seq = ?`,
				d.LeaseUntil, d.LeaseToken, d.Seq); err != nil {
				return err
			}
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// lockDeliveries locks the delivery rows of a join, not the event and
// endpoint rows beside them.
func (s *Store) lockDeliveries() string {
	if s.d.ForUpdate == "" {
		return ""
	}
	return s.d.ForUpdate + " OF d"
}

// FinishDeliveries implements storage.Webhooks. Rows are locked in seq
// order, as claims lock them, so two rounds never deadlock.
func (s *Store) FinishDeliveries(ctx context.Context, token string, results []webhooks.Result, p webhooks.Policy) error {
	results = slices.SortedFunc(slices.Values(results), func(a, b webhooks.Result) int { return cmp.Compare(a.Seq, b.Seq) })
	return s.write(ctx, func(tx *tx) error {
		for _, r := range results {
			if err := s.finishDelivery(ctx, tx, token, r, p); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Store) finishDelivery(ctx context.Context, tx *tx, token string, r webhooks.Result, p webhooks.Policy) error {
	d, err := scanDelivery(tx.QueryRow(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries d
		JOIN webhook_events e ON e.id = d.event_id WHERE d.seq = ?`+s.lockDeliveries(), r.Seq))
	if errors.Is(err, storage.ErrNotFound) {
		return nil // its endpoint was deleted meanwhile
	}
	if err != nil {
		return err
	}
	if a := r.Attempt; a != nil {
		if _, err := tx.Exec(ctx, `INSERT INTO webhook_attempts (delivery_seq, attempted_at, status_code, latency_ms, response_excerpt, error) VALUES (?, ?, ?, ?, ?, ?)`,
			r.Seq, a.AttemptedAt, a.StatusCode, a.LatencyMS, a.ResponseExcerpt, a.Error); err != nil {
			return err
		}
	}
	d, save, disable := p.Finish(d, token, r)
	if !save {
		return nil
	}
	if _, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET state = ?, attempts = ?, next_attempt_at = ?, lease_until = ?, lease_token = ? WHERE seq = ?`,
		d.State, d.Attempts, d.NextAttemptAt, d.LeaseUntil, d.LeaseToken, r.Seq); err != nil {
		return err
	}
	if disable == "" {
		return nil
	}
	e, err := s.getEndpoint(ctx, tx, d.EndpointID, true)
	if err != nil {
		return err
	}
	e.Disable(disable, r.Attempt.AttemptedAt)
	return saveEndpoint(ctx, tx, e)
}

// PruneWebhookDeliveries implements storage.Webhooks.
func (s *Store) PruneWebhookDeliveries(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.write(ctx, func(tx *tx) (err error) {
		if n, err = tx.Exec(ctx, `DELETE FROM webhook_deliveries WHERE state != ? AND created_at < ?`, webhooks.Pending, before); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM webhook_events WHERE created_at < ? AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = webhook_events.id)`, before)
		return err
	})
	return n, err
}

// ListWebhookDeliveries implements storage.Webhooks.
func (s *Store) ListWebhookDeliveries(ctx context.Context, endpointID string, q storage.ListQuery) ([]storage.WebhookDelivery, error) {
	var out []storage.WebhookDelivery
	err := s.read(ctx, func(tx Conn) error {
		if _, err := s.getEndpoint(ctx, tx, endpointID, false); err != nil {
			return err
		}
		ds, err := queryAll(ctx, tx, scanDelivery, `SELECT `+deliveryColumns+` FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
			WHERE d.endpoint_id = ? AND (? = '' OR d.seq < (SELECT seq FROM webhook_deliveries WHERE endpoint_id = ? AND event_id = ?))
			ORDER BY d.seq DESC LIMIT ?`, endpointID, q.After, endpointID, q.After, limitArg(q.Limit))
		if err != nil {
			return err
		}
		out = make([]storage.WebhookDelivery, 0, len(ds))
		for _, d := range ds {
			attempts, err := queryAll(ctx, tx, scanAttempt, `SELECT attempted_at, status_code, latency_ms, response_excerpt, error FROM webhook_attempts WHERE delivery_seq = ? ORDER BY `+s.d.AttemptOrder, d.Seq)
			if err != nil {
				return err
			}
			out = append(out, storage.WebhookDelivery{Delivery: d, Attempts: attempts})
		}
		return nil
	})
	return out, err
}

func scanAttempt(r Row) (webhooks.Attempt, error) {
	var a webhooks.Attempt
	err := r.Scan(&a.AttemptedAt, &a.StatusCode, &a.LatencyMS, &a.ResponseExcerpt, &a.Error)
	return a, err
}
