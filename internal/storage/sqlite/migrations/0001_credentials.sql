-- Every bearer secret the server accepts, stored as a SHA-256 hash.
-- kind decides the scope (SPEC §6); the scope columns are set per kind.
CREATE TABLE credentials (
    id             TEXT PRIMARY KEY,
    kind           TEXT NOT NULL CHECK (kind IN ('api_key', 'environment_key', 'sessions_token')),
    name           TEXT NOT NULL DEFAULT '',
    hash           TEXT NOT NULL UNIQUE,
    environment_id TEXT,
    session_id     TEXT,
    work_id        TEXT,
    created_at     TEXT NOT NULL,
    revoked_at     TEXT
);
CREATE INDEX credentials_session ON credentials (session_id) WHERE session_id IS NOT NULL;
