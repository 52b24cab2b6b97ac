-- The change feed (SPEC §8): every memory version gets its store's next
-- sequence in the transaction that writes it. memory_stores.last_sequence is
-- the counter; since every write to a store's memories updates that row,
-- writers to one store take turns on it, which is what makes the sequence
-- gap-free and its order the commit order.
ALTER TABLE memory_stores ADD COLUMN last_sequence INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memory_versions ADD COLUMN sequence INTEGER NOT NULL DEFAULT 0;

-- Versions written before the feed existed are numbered in id order, which
-- is their commit order.
UPDATE memory_versions SET sequence = numbered.n
FROM (SELECT id, row_number() OVER (PARTITION BY store_id ORDER BY id) AS n FROM memory_versions) AS numbered
WHERE numbered.id = memory_versions.id;
UPDATE memory_stores SET last_sequence = (SELECT count(*) FROM memory_versions v WHERE v.store_id = memory_stores.id);

-- One version per sequence, and the feed's range scan.
CREATE UNIQUE INDEX memory_versions_sequence ON memory_versions (store_id, sequence);
