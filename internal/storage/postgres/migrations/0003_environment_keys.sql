-- Environment keys are listed and revoked per environment
-- (GET/DELETE /v1/environments/{id}/keys): index the live ones by it.
CREATE INDEX credentials_environment_keys ON credentials (environment_id, id)
    WHERE kind = 'environment_key' AND revoked_at IS NULL;
