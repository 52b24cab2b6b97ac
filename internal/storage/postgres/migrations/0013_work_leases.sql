-- Every poll, ack and heartbeat first settles its environment's lapsed
-- leases. Without an index on the lease the query read every live item of
-- the environment (a heap fetch each) to find none lapsed; with it, the
-- leases due by now are one range of the index, empty most of the time.
CREATE INDEX work_items_leases ON work_items (environment_id, lease_expires_at) WHERE state <> 'stopped' AND lease_expires_at IS NOT NULL;
