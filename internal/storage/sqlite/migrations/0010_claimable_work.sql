-- A claim wants the oldest queued item nobody claimed. work_items_queue
-- (environment_id, state, queued_at) also holds the items claimed but not
-- yet acknowledged, so a claim stepped over every one of them in queue
-- order before it found a free item: with 32 workers claiming from one
-- deep queue, each claim cost as much as the claims before it. With
-- claimed_at before queued_at, the unclaimed items (claimed_at IS NULL)
-- come first, already in queue order, and the claimed ones old enough to
-- be offered again are a range of their own. The index also serves every
-- query work_items_queue served (its first two columns are the same).
DROP INDEX work_items_queue;
CREATE INDEX work_items_claimable ON work_items (environment_id, state, claimed_at, queued_at, id);
