-- Console users and their signed-in browsers. Apart from credentials: a
-- console session is never an API credential, and an API key never opens
-- the console.
CREATE TABLE users (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    created_at    TEXT NOT NULL
);

-- hash is the SHA-256 of the cookie's secret; deleting a user ends their
-- sessions at once.
CREATE TABLE console_sessions (
    id         TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    hash       TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX console_sessions_user ON console_sessions (user_id);
