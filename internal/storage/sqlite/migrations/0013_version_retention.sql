-- Version retention (internal/retention): a store's own policy in its text
-- form (keep_all, keep_last=N, max_age=DURATION), NULL to follow the
-- server's default; and the highest change-feed sequence whose version the
-- pruner deleted, below which a feed cursor is refused.
ALTER TABLE memory_stores ADD COLUMN version_retention TEXT;
ALTER TABLE memory_stores ADD COLUMN pruned_through INTEGER NOT NULL DEFAULT 0;
