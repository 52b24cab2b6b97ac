-- The whole schema of memstore on PostgreSQL: credentials, memory stores
-- (SPEC §2) and the control plane (SPEC §3, §4), the same tables as the
-- SQLite backend's migrations 0001-0003.
--
-- Ids and paths use the "C" collation: byte-wise order, which is the
-- listing order of the API, what makes ids sort by creation time and what
-- makes a directory a contiguous key range ("/a/" up to "/a0").
-- Times are timestamptz, held to the microsecond (the backend's clock is
-- truncated to match, so a heartbeat token reads back as it was issued).
-- JSON columns are text: memstore only echoes them.

CREATE TABLE credentials (
    id             text COLLATE "C" PRIMARY KEY,
    kind           text NOT NULL CHECK (kind IN ('api_key', 'environment_key', 'sessions_token')),
    name           text NOT NULL DEFAULT '',
    hash           text NOT NULL UNIQUE,
    environment_id text COLLATE "C",
    session_id     text COLLATE "C",
    work_id        text COLLATE "C",
    created_at     timestamptz NOT NULL,
    revoked_at     timestamptz
);
CREATE INDEX credentials_session ON credentials (session_id) WHERE session_id IS NOT NULL;
CREATE INDEX credentials_environment ON credentials (environment_id) WHERE environment_id IS NOT NULL;

CREATE TABLE memory_stores (
    id           text COLLATE "C" PRIMARY KEY,
    name         text NOT NULL,
    description  text NOT NULL DEFAULT '',
    metadata     text NOT NULL DEFAULT '{}',
    -- Live memories, kept in step by every create and delete: the store
    -- row is locked by every memory write, so the limit is one row read.
    memory_count integer NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    archived_at  timestamptz
);

CREATE TABLE memories (
    id                 text COLLATE "C" PRIMARY KEY,
    store_id           text COLLATE "C" NOT NULL REFERENCES memory_stores (id) ON DELETE CASCADE,
    path               text COLLATE "C" NOT NULL,
    content_sha256     text NOT NULL,
    content_size_bytes bigint NOT NULL,
    version_id         text COLLATE "C" NOT NULL,
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL
);
CREATE UNIQUE INDEX memories_store_path ON memories (store_id, path);

CREATE TABLE memory_versions (
    id                 text COLLATE "C" PRIMARY KEY,
    store_id           text COLLATE "C" NOT NULL REFERENCES memory_stores (id) ON DELETE CASCADE,
    memory_id          text COLLATE "C" NOT NULL,
    operation          text NOT NULL CHECK (operation IN ('created', 'modified', 'deleted')),
    path               text COLLATE "C",
    content            bytea,
    content_sha256     text,
    content_size_bytes bigint,
    created_at         timestamptz NOT NULL,
    created_by_type    text NOT NULL,
    created_by_id      text NOT NULL,
    redacted_at        timestamptz,
    redacted_by_type   text,
    redacted_by_id     text
);
CREATE INDEX memory_versions_store ON memory_versions (store_id, id);
CREATE INDEX memory_versions_memory ON memory_versions (memory_id, id);
CREATE INDEX memory_versions_actor ON memory_versions (store_id, created_by_id, id);

CREATE TABLE environments (
    id          text COLLATE "C" PRIMARY KEY,
    name        text NOT NULL,
    description text,
    config_type text NOT NULL,
    scope       text NOT NULL DEFAULT '',
    metadata    text NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    archived_at timestamptz
);

CREATE TABLE agents (
    id          text COLLATE "C" PRIMARY KEY,
    body        text NOT NULL,
    created_at  timestamptz NOT NULL,
    archived_at timestamptz
);

CREATE TABLE sessions (
    id             text COLLATE "C" PRIMARY KEY,
    environment_id text COLLATE "C" NOT NULL REFERENCES environments (id),
    agent_id       text COLLATE "C" NOT NULL,
    status         text NOT NULL,
    body           text NOT NULL,
    created_at     timestamptz NOT NULL,
    archived_at    timestamptz
);
CREATE INDEX sessions_environment ON sessions (environment_id);

CREATE TABLE session_resources (
    id              text COLLATE "C" PRIMARY KEY,
    session_id      text COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    position        integer NOT NULL,
    memory_store_id text COLLATE "C" NOT NULL,
    body            text NOT NULL
);
CREATE INDEX session_resources_session ON session_resources (session_id, position);
CREATE INDEX session_resources_store ON session_resources (memory_store_id);

-- seq orders a session's log. Appends to one session hold its row lock, so
-- within a session seq follows commit order.
CREATE TABLE session_events (
    seq        bigserial PRIMARY KEY,
    id         text COLLATE "C" NOT NULL UNIQUE,
    session_id text COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    type       text NOT NULL,
    body       text NOT NULL
);
CREATE INDEX session_events_session ON session_events (session_id, seq);

CREATE TABLE work_items (
    id                  text COLLATE "C" PRIMARY KEY,
    environment_id      text COLLATE "C" NOT NULL,
    session_id          text COLLATE "C" NOT NULL,
    state               text NOT NULL CHECK (state IN ('queued', 'starting', 'active', 'stopping', 'stopped')),
    metadata            text NOT NULL DEFAULT '{}',
    created_at          timestamptz NOT NULL,
    queued_at           timestamptz NOT NULL,
    claimed_at          timestamptz,
    worker_id           text NOT NULL DEFAULT '',
    token_id            text NOT NULL DEFAULT '',
    lease_expires_at    timestamptz,
    lease_ttl_seconds   bigint NOT NULL DEFAULT 0,
    acknowledged_at     timestamptz,
    started_at          timestamptz,
    latest_heartbeat_at timestamptz,
    stop_requested_at   timestamptz,
    stopped_at          timestamptz
);
CREATE INDEX work_items_queue ON work_items (environment_id, state, queued_at);
CREATE INDEX work_items_session ON work_items (session_id);
