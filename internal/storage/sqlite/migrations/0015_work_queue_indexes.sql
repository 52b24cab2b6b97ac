-- Every poll, ack and heartbeat first settles its environment's lapsed
-- leases: the leases due by now are one range of this index instead of a
-- read of every live item of the environment.
CREATE INDEX work_items_leases ON work_items (environment_id, lease_expires_at) WHERE state != 'stopped' AND lease_expires_at IS NOT NULL;

-- A reclaiming poll takes the oldest queued item claimed long enough ago:
-- the claimed items in queue order, the claim time beside each.
CREATE INDEX work_items_reclaimable ON work_items (environment_id, queued_at, id, claimed_at) WHERE state = 'queued' AND claimed_at IS NOT NULL;
