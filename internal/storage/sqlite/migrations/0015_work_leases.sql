-- Every poll, ack and heartbeat first settles its environment's lapsed
-- leases: the leases due by now are one range of this index instead of a
-- read of every live item of the environment.
CREATE INDEX work_items_leases ON work_items (environment_id, lease_expires_at) WHERE state != 'stopped' AND lease_expires_at IS NOT NULL;
