-- An event row no longer checks its session through a foreign key. Every
-- append inserts its events (four for a scripted turn) under its session's
-- row lock, taken in the same transaction, so the session is known to
-- exist; the key's trigger checked it again for every row, a query of its
-- own each time: about a quarter of the database's time on an append's
-- write statement, 50–60 µs of 200 in a pgbench replay of one
-- (docs/postgresql-performance.md). Deleting a session deletes its events
-- itself (sqlstore.Store.DeleteSession), in the transaction that deletes
-- the session, which the cascade did before.
ALTER TABLE session_events DROP CONSTRAINT IF EXISTS session_events_session_id_fkey;
