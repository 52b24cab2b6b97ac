-- Webhook endpoints and the outbox of their deliveries (issue 15). An
-- event and its deliveries are written in the transaction of the change
-- that emits them; the dispatcher leases deliveries (lease_until,
-- lease_token) and records every attempt.
CREATE TABLE webhook_endpoints (
	id TEXT PRIMARY KEY,
	state TEXT NOT NULL,
	body TEXT NOT NULL, -- the wire form (api.WebhookEndpoint)
	secret TEXT NOT NULL -- kept in clear: every delivery is signed with it
);

CREATE TABLE webhook_events (
	id TEXT PRIMARY KEY,
	type TEXT NOT NULL,
	payload TEXT NOT NULL,
	created_at TEXT NOT NULL
);

CREATE TABLE webhook_deliveries (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	event_id TEXT NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
	endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
	order_key TEXT NOT NULL,
	state TEXT NOT NULL,
	attempts INTEGER NOT NULL DEFAULT 0,
	created_at TEXT NOT NULL,
	next_attempt_at TEXT NOT NULL,
	lease_until TEXT,
	lease_token TEXT NOT NULL DEFAULT ''
);
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (state, seq);
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, seq);

CREATE TABLE webhook_attempts (
	delivery_seq INTEGER NOT NULL REFERENCES webhook_deliveries (seq) ON DELETE CASCADE,
	attempted_at TEXT NOT NULL,
	status_code INTEGER NOT NULL,
	latency_ms INTEGER NOT NULL,
	response_excerpt TEXT NOT NULL,
	error TEXT NOT NULL
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_seq);
