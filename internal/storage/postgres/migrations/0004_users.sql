-- Console users and their signed-in browsers, apart from credentials: a
-- console session is never an API credential, and an API key never opens
-- the console.
CREATE TABLE users (
    id            text COLLATE "C" PRIMARY KEY,
    name          text NOT NULL UNIQUE,
    password_hash text NOT NULL,
    created_at    timestamptz NOT NULL
);

-- hash is the SHA-256 of the cookie's secret; deleting a user ends their
-- sessions at once.
CREATE TABLE console_sessions (
    id         text COLLATE "C" PRIMARY KEY,
    user_id    text COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    hash       text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX console_sessions_user ON console_sessions (user_id);
