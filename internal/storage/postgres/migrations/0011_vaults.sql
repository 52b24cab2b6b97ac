-- Vaults (issue 21): credentials sessions name in vault_ids. body is the
-- public JSON (never the secret); secret is the token sealed with the
-- server's secrets key (AES-256-GCM), never in clear.
CREATE TABLE vaults (
	id text PRIMARY KEY,
	body text NOT NULL,
	created_at timestamptz NOT NULL,
	archived_at timestamptz
);

CREATE TABLE vault_credentials (
	id text PRIMARY KEY,
	vault_id text NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
	auth_type text NOT NULL,
	mcp_server_url text NOT NULL,
	body text NOT NULL,
	secret bytea NOT NULL,
	created_at timestamptz NOT NULL,
	archived_at timestamptz
);
CREATE INDEX vault_credentials_vault ON vault_credentials (vault_id, id);
