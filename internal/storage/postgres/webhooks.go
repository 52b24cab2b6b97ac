package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/webhooks"
)

// emit writes the events evs of a change into the outbox, inside the
// change's transaction q (one s.tx runs): one event row and one delivery
// per endpoint webhooks.Recipients names. An event nobody receives is not
// stored. A transaction that stored deliveries wakes the dispatchers when
// it commits.
func (s *DB) emit(ctx context.Context, q querier, evs ...webhooks.Event) error {
	if len(evs) == 0 {
		return nil
	}
	endpoints, err := queryAll(ctx, q, scanEndpoint, `SELECT body, secret FROM webhook_endpoints WHERE state = $1`, webhooks.StateEnabled)
	if err != nil || len(endpoints) == 0 {
		return err
	}
	now, err := s.now(ctx, q)
	if err != nil {
		return err
	}
	for _, e := range evs {
		to := webhooks.Recipients(endpoints, e.Type)
		if len(to) == 0 {
			continue
		}
		e.ID, e.CreatedAt = ids.NewAt(ids.WebhookEvent, now), now
		if _, err := q.Exec(ctx, `INSERT INTO webhook_events (id, type, payload, created_at) VALUES ($1, $2, $3, $4)`,
			e.ID, e.Type, string(webhooks.Payload(e)), now); err != nil {
			return fmt.Errorf("webhook outbox: %w", err)
		}
		for _, endpoint := range to {
			if _, err := q.Exec(ctx, `INSERT INTO webhook_deliveries (event_id, endpoint_id, order_key, state, created_at, next_attempt_at) VALUES ($1, $2, $3, $4, $5, $5)`,
				e.ID, endpoint, e.OrderKey, webhooks.Pending, now); err != nil {
				return fmt.Errorf("webhook outbox: %w", err)
			}
		}
		s.outbox.Wrote(q)
	}
	return nil
}

// DeliveriesStored implements storage.Webhooks. Only this handle's
// transactions count: the replica that made a change sends its webhooks,
// and the others' dispatchers find any left over on their interval.
func (s *DB) DeliveriesStored() <-chan struct{} { return s.outbox.Stored() }

func scanEndpoint(r pgx.Row) (webhooks.Endpoint, error) {
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

func getEndpoint(ctx context.Context, q querier, id string, lock bool) (webhooks.Endpoint, error) {
	return scanEndpoint(q.QueryRow(ctx, `SELECT body, secret FROM webhook_endpoints WHERE id = $1`+forUpdate(lock), id))
}

func saveEndpoint(ctx context.Context, q querier, e webhooks.Endpoint) error {
	_, err := q.Exec(ctx, `UPDATE webhook_endpoints SET state = $1, body = $2, secret = $3 WHERE id = $4`,
		e.State, toJSON(e.WebhookEndpoint), e.Secret, e.ID)
	return err
}

// CreateWebhookEndpoint implements storage.Webhooks.
func (s *DB) CreateWebhookEndpoint(ctx context.Context, e webhooks.Endpoint) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO webhook_endpoints (id, state, body, secret) VALUES ($1, $2, $3, $4)`,
		e.ID, e.State, toJSON(e.WebhookEndpoint), e.Secret)
	if err != nil {
		return unavailable(fmt.Errorf("create webhook endpoint %s: %w", e.ID, err))
	}
	return nil
}

// GetWebhookEndpoint implements storage.Webhooks.
func (s *DB) GetWebhookEndpoint(ctx context.Context, id string) (webhooks.Endpoint, error) {
	e, err := getEndpoint(ctx, s.pool, id, false)
	return e, unavailable(err)
}

// ListWebhookEndpoints implements storage.Webhooks.
func (s *DB) ListWebhookEndpoints(ctx context.Context, q storage.ListQuery) ([]webhooks.Endpoint, error) {
	out, err := queryAll(ctx, s.pool, scanEndpoint, `SELECT body, secret FROM webhook_endpoints WHERE ($1 = '' OR id < $1) ORDER BY id DESC LIMIT $2`,
		q.After, limitArg(q.Limit))
	return out, unavailable(err)
}

// UpdateWebhookEndpoint implements storage.Webhooks.
func (s *DB) UpdateWebhookEndpoint(ctx context.Context, id string, fn func(*webhooks.Endpoint) error) (webhooks.Endpoint, error) {
	var out webhooks.Endpoint
	err := s.tx(ctx, func(tx pgx.Tx) error {
		e, err := getEndpoint(ctx, tx, id, true)
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
func (s *DB) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM webhook_endpoints WHERE id = $1`, id)
	if err != nil {
		return unavailable(fmt.Errorf("delete webhook endpoint %s: %w", id, err))
	}
	if tag.RowsAffected() == 0 {
		return storage.ErrNotFound
	}
	return nil
}

const deliveryColumns = `d.seq, d.event_id, e.type, d.endpoint_id, d.order_key, e.payload, d.state, d.attempts, d.created_at, d.next_attempt_at, d.lease_until, d.lease_token`

func scanDelivery(r pgx.Row) (webhooks.Delivery, error) {
	var (
		d       webhooks.Delivery
		payload string
	)
	if err := r.Scan(&d.Seq, &d.EventID, &d.EventType, &d.EndpointID, &d.OrderKey, &payload, &d.State, &d.Attempts, &d.CreatedAt, &d.NextAttemptAt, &d.LeaseUntil, &d.LeaseToken); err != nil {
		return d, notFound(err)
	}
	d.Payload = []byte(payload)
	d.CreatedAt, d.NextAttemptAt = d.CreatedAt.UTC(), d.NextAttemptAt.UTC()
	if d.LeaseUntil != nil {
		t := d.LeaseUntil.UTC()
		d.LeaseUntil = &t
	}
	return d, nil
}

// claimWindow bounds how many pending deliveries one claim looks at: the
// oldest ones, whose group heads are what Pick may choose.
const claimWindow = 1000

// ClaimDeliveries implements storage.Webhooks. The claim locks the pending
// rows it reads (FOR UPDATE, not SKIP LOCKED: skipping a locked head would
// let its successor overtake it), so the claims of several replicas run one
// after the other and each sees the leases the previous one took.
func (s *DB) ClaimDeliveries(ctx context.Context, now time.Time, limit int, token string, p webhooks.Policy) ([]webhooks.Delivery, error) {
	var out []webhooks.Delivery
	err := s.tx(ctx, func(tx pgx.Tx) error {
		pending, err := queryAll(ctx, tx, scanDelivery, `SELECT `+deliveryColumns+` FROM webhook_deliveries d
			JOIN webhook_events e ON e.id = d.event_id JOIN webhook_endpoints w ON w.id = d.endpoint_id
			WHERE d.state = $1 AND w.state = $2 ORDER BY d.seq LIMIT $3 FOR UPDATE OF d`, webhooks.Pending, webhooks.StateEnabled, claimWindow)
		if err != nil {
			return err
		}
		out = nil
		for _, d := range webhooks.Pick(pending, now, limit) {
			d = p.Claim(d, token, now)
			if _, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET lease_until = $1, lease_token = $2 WHERE seq = $3`,
				d.LeaseUntil, d.LeaseToken, d.Seq); err != nil {
				return err
			}
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// FinishDeliveries implements storage.Webhooks. Rows are locked in seq
// order, as claims lock them, so two rounds never deadlock.
func (s *DB) FinishDeliveries(ctx context.Context, token string, results []webhooks.Result, p webhooks.Policy) error {
	results = slices.SortedFunc(slices.Values(results), func(a, b webhooks.Result) int { return cmp.Compare(a.Seq, b.Seq) })
	return s.tx(ctx, func(tx pgx.Tx) error {
		for _, r := range results {
			if err := finishDelivery(ctx, tx, token, r, p); err != nil {
				return err
			}
		}
		return nil
	})
}

func finishDelivery(ctx context.Context, tx pgx.Tx, token string, r webhooks.Result, p webhooks.Policy) error {
	d, err := scanDelivery(tx.QueryRow(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries d
		JOIN webhook_events e ON e.id = d.event_id WHERE d.seq = $1 FOR UPDATE OF d`, r.Seq))
	if errors.Is(err, storage.ErrNotFound) {
		return nil // its endpoint was deleted meanwhile
	}
	if err != nil {
		return err
	}
	if a := r.Attempt; a != nil {
		if _, err := tx.Exec(ctx, `INSERT INTO webhook_attempts (delivery_seq, attempted_at, status_code, latency_ms, response_excerpt, error) VALUES ($1, $2, $3, $4, $5, $6)`,
			r.Seq, a.AttemptedAt, a.StatusCode, a.LatencyMS, a.ResponseExcerpt, a.Error); err != nil {
			return err
		}
	}
	d, save, disable := p.Finish(d, token, r)
	if !save {
		return nil
	}
	if _, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET state = $1, attempts = $2, next_attempt_at = $3, lease_until = $4, lease_token = $5 WHERE seq = $6`,
		d.State, d.Attempts, d.NextAttemptAt, d.LeaseUntil, d.LeaseToken, r.Seq); err != nil {
		return err
	}
	if disable == "" {
		return nil
	}
	e, err := getEndpoint(ctx, tx, d.EndpointID, true)
	if err != nil {
		return err
	}
	e.Disable(disable, r.Attempt.AttemptedAt)
	return saveEndpoint(ctx, tx, e)
}

// PruneWebhookDeliveries implements storage.Webhooks.
func (s *DB) PruneWebhookDeliveries(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM webhook_deliveries WHERE state != $1 AND created_at < $2`, webhooks.Pending, before)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		_, err = tx.Exec(ctx, `DELETE FROM webhook_events e WHERE created_at < $1 AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)`, before)
		return err
	})
	return n, err
}

// ListWebhookDeliveries implements storage.Webhooks.
func (s *DB) ListWebhookDeliveries(ctx context.Context, endpointID string, q storage.ListQuery) ([]storage.WebhookDelivery, error) {
	var out []storage.WebhookDelivery
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		if _, err := getEndpoint(ctx, tx, endpointID, false); err != nil {
			return err
		}
		ds, err := queryAll(ctx, tx, scanDelivery, `SELECT `+deliveryColumns+` FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
			WHERE d.endpoint_id = $1 AND ($2 = '' OR d.seq < (SELECT seq FROM webhook_deliveries WHERE endpoint_id = $1 AND event_id = $2))
			ORDER BY d.seq DESC LIMIT $3`, endpointID, q.After, limitArg(q.Limit))
		if err != nil {
			return err
		}
		out = make([]storage.WebhookDelivery, 0, len(ds))
		for _, d := range ds {
			attempts, err := queryAll(ctx, tx, scanAttempt, `SELECT attempted_at, status_code, latency_ms, response_excerpt, error FROM webhook_attempts WHERE delivery_seq = $1 ORDER BY id`, d.Seq)
			if err != nil {
				return err
			}
			out = append(out, storage.WebhookDelivery{Delivery: d, Attempts: attempts})
		}
		return nil
	})
	return out, err
}

func scanAttempt(r pgx.Row) (webhooks.Attempt, error) {
	var a webhooks.Attempt
	if err := r.Scan(&a.AttemptedAt, &a.StatusCode, &a.LatencyMS, &a.ResponseExcerpt, &a.Error); err != nil {
		return a, err
	}
	a.AttemptedAt = a.AttemptedAt.UTC()
	return a, nil
}
