-- Vaults (issue 21): credentials sessions name in vault_ids. body is the
-- public JSON (never the secret); secret is the token sealed with the
-- server's secrets key (AES-256-GCM), never in clear.
CREATE TABLE vaults (
	id TEXT PRIMARY KEY,
	body TEXT NOT NULL,
	created_at TEXT NOT NULL,
	archived_at TEXT
);

CREATE TABLE vault_credentials (
	id TEXT PRIMARY KEY,
	vault_id TEXT NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
	auth_type TEXT NOT NULL,
	mcp_server_url TEXT NOT NULL,
	body TEXT NOT NULL,
	secret BLOB NOT NULL,
	created_at TEXT NOT NULL,
	archived_at TEXT
);
CREATE INDEX vault_credentials_vault ON vault_credentials (vault_id, id);
