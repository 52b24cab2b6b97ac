-- The last poll of each worker on each environment, so that every replica
-- counts workers_polling over the polls all of them saw.
CREATE TABLE worker_polls (
    environment_id text COLLATE "C" NOT NULL,
    worker_id      text NOT NULL,
    polled_at      timestamptz NOT NULL,
    PRIMARY KEY (environment_id, worker_id)
);
