-- The control plane (SPEC §3, §4): environments and their work queue,
-- agents, sessions with their memory-store resources, and session events.
-- JSON columns hold the parts of the wire objects memstore only echoes.
CREATE TABLE environments (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    description TEXT,
    config_type TEXT NOT NULL,
    scope       TEXT NOT NULL DEFAULT '',
    metadata    TEXT NOT NULL DEFAULT '{}',
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    archived_at TEXT
);

CREATE TABLE agents (
    id          TEXT PRIMARY KEY,
    body        TEXT NOT NULL,  -- the api.Agent JSON
    created_at  TEXT NOT NULL,
    archived_at TEXT
);

CREATE TABLE sessions (
    id             TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL REFERENCES environments (id),
    agent_id       TEXT NOT NULL,
    status         TEXT NOT NULL,
    body           TEXT NOT NULL,  -- the api.Session JSON without resources
    created_at     TEXT NOT NULL,
    archived_at    TEXT
);
CREATE INDEX sessions_environment ON sessions (environment_id);

CREATE TABLE session_resources (
    id              TEXT PRIMARY KEY,
    session_id      TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    position        INTEGER NOT NULL,
    memory_store_id TEXT NOT NULL,
    body            TEXT NOT NULL  -- the api.SessionResource JSON
);
CREATE INDEX session_resources_session ON session_resources (session_id, position);
CREATE INDEX session_resources_store ON session_resources (memory_store_id);

-- seq orders a session's log: pagination cursors and Last-Event-ID resume.
CREATE TABLE session_events (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           TEXT NOT NULL UNIQUE,
    session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    type         TEXT NOT NULL,
    body         TEXT NOT NULL  -- the api.Event JSON
);
CREATE INDEX session_events_session ON session_events (session_id, seq);

CREATE TABLE work_items (
    id                  TEXT PRIMARY KEY,
    environment_id      TEXT NOT NULL,
    session_id          TEXT NOT NULL,
    state               TEXT NOT NULL CHECK (state IN ('queued', 'starting', 'active', 'stopping', 'stopped')),
    metadata            TEXT NOT NULL DEFAULT '{}',
    created_at          TEXT NOT NULL,
    queued_at           TEXT NOT NULL,
    claimed_at          TEXT,
    worker_id           TEXT NOT NULL DEFAULT '',
    token_id            TEXT NOT NULL DEFAULT '',
    lease_expires_at    TEXT,
    lease_ttl_seconds   INTEGER NOT NULL DEFAULT 0,
    acknowledged_at     TEXT,
    started_at          TEXT,
    latest_heartbeat_at TEXT,
    stop_requested_at   TEXT,
    stopped_at          TEXT
);
CREATE INDEX work_items_queue ON work_items (environment_id, state, queued_at);
CREATE INDEX work_items_session ON work_items (session_id);
