-- Versions are listed newest first in change-feed order (sequence), the
-- store's commit order, as on SQLite: every filter's index ends in it.
DROP INDEX memory_versions_store;
DROP INDEX memory_versions_memory;
CREATE INDEX memory_versions_memory ON memory_versions (memory_id, sequence);
DROP INDEX memory_versions_actor;
CREATE INDEX memory_versions_actor ON memory_versions (store_id, created_by_id, sequence);

-- A claim walks the unclaimed queued items apart from the claimed ones.
DROP INDEX work_items_queue;
CREATE INDEX work_items_claimable ON work_items (environment_id, state, claimed_at, queued_at, id);
