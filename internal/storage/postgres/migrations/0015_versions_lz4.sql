-- Every memory write stores its content in a version row, compressed in
-- the transaction that holds its store's lock. PostgreSQL's own method
-- (pglz) took about 16 µs of that backend per 4 KB, lz4 about 4, and lz4
-- also reads back faster (docs/postgresql-performance.md). Only contents
-- written from now on use it; those before stay as they are and read the
-- same. A server built without lz4, or older than PostgreSQL 14 (which
-- has no SET COMPRESSION), keeps pglz: the statement runs as a string so
-- that either refusal is caught here. Such a server that later gains lz4
-- can take it by hand: ALTER TABLE memory_versions ALTER COLUMN content
-- SET COMPRESSION lz4 (docs/postgresql-performance.md).
DO $$
BEGIN
    EXECUTE 'ALTER TABLE memory_versions ALTER COLUMN content SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
    RAISE NOTICE 'memstore: memory versions stay compressed with pglz: %', SQLERRM;
END
$$;
