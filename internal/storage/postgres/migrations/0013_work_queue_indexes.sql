-- Every poll, ack and heartbeat first settles its environment's lapsed
-- leases. Without an index on the lease the query read every live item of
-- the environment (a heap fetch each) to find none lapsed; with it, the
-- leases due by now are one range of the index, empty most of the time.
CREATE INDEX work_items_leases ON work_items (environment_id, lease_expires_at) WHERE state <> 'stopped' AND lease_expires_at IS NOT NULL;

-- A reclaiming poll wants the oldest queued item claimed long enough ago.
-- work_items_claimable holds the claimed items in claim order, so the
-- query read and sorted every one claimed before the cutoff; here they
-- are in queue order, the claim time beside each, and the first one old
-- enough is taken.
CREATE INDEX work_items_reclaimable ON work_items (environment_id, queued_at, id, claimed_at) WHERE state = 'queued' AND claimed_at IS NOT NULL;
