-- Version listings walk a store's versions in change-feed order (sequence
-- descending), which is their commit order like id order, so that the
-- feed's index (memory_versions_sequence, migration 0007) also serves the
-- plain newest-first listing and memory_versions_store goes: one index less
-- to write per memory write, in the committer that runs writes one after
-- another. The memory and actor filters' indexes end in sequence to match.
DROP INDEX memory_versions_store;
DROP INDEX memory_versions_memory;
CREATE INDEX memory_versions_memory ON memory_versions (memory_id, sequence);
DROP INDEX memory_versions_actor;
CREATE INDEX memory_versions_actor ON memory_versions (store_id, created_by_id, sequence);
