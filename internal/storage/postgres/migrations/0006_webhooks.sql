-- Webhook endpoints and the outbox of their deliveries (issue 15). An
-- event and its deliveries are written in the transaction of the change
-- that emits them; dispatchers of every replica lease deliveries
-- (lease_until, lease_token) under the row locks of one claim, and record
-- every attempt.
CREATE TABLE webhook_endpoints (
	id text PRIMARY KEY,
	state text NOT NULL,
	body text NOT NULL, -- the wire form (api.WebhookEndpoint)
	secret text NOT NULL -- kept in clear: every delivery is signed with it
);

CREATE TABLE webhook_events (
	id text PRIMARY KEY,
	type text NOT NULL,
	payload text NOT NULL,
	created_at timestamptz NOT NULL
);

CREATE TABLE webhook_deliveries (
	seq bigserial PRIMARY KEY,
	event_id text NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
	endpoint_id text NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
	order_key text NOT NULL,
	state text NOT NULL,
	attempts integer NOT NULL DEFAULT 0,
	created_at timestamptz NOT NULL,
	next_attempt_at timestamptz NOT NULL,
	lease_until timestamptz,
	lease_token text NOT NULL DEFAULT ''
);
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (state, seq);
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, seq);

CREATE TABLE webhook_attempts (
	id bigserial PRIMARY KEY,
	delivery_seq bigint NOT NULL REFERENCES webhook_deliveries (seq) ON DELETE CASCADE,
	attempted_at timestamptz NOT NULL,
	status_code integer NOT NULL,
	latency_ms bigint NOT NULL,
	response_excerpt text NOT NULL,
	error text NOT NULL
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_seq);
