-- The server computes a memory's search entry (postgres.tsIndex.Entry) and
-- writes it with the memory's row: PostgreSQL's text parser cost a 4 KB
-- memory about half a millisecond of the backend holding the store's row
-- lock, which one store's writes waited for in turn
-- (docs/postgresql-performance.md). The trigger keeps an entry the
-- statement wrote and computes one only for a row written without it (a
-- copy from SQLite, a statement by hand), so the index stays current
-- whichever code path wrote.
--
-- Its words are now runs of letters and digits, as the server's
-- (storage.SearchWords) and SQLite's: any character that is neither
-- separates words, not only ASCII punctuation. Paths are compared in the
-- "C" collation, whose letters are ASCII only, so the path is split in the
-- database's own (as the content always was).
CREATE OR REPLACE FUNCTION memory_search_document(path text, content bytea) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT setweight(to_tsvector('simple', regexp_replace(path COLLATE "default", '[^[:alnum:]]+', ' ', 'g')), 'A')
        || to_tsvector('simple', regexp_replace(memory_search_text(content), '[^[:alnum:]]+', ' ', 'g'))
$$;

CREATE OR REPLACE FUNCTION memory_search_fill() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- An UPDATE that did not set search carries the old row's entry.
    IF NEW.search IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.search IS DISTINCT FROM OLD.search) THEN
        RETURN NEW;
    END IF;
    NEW.search := memory_search_document(NEW.path, (SELECT content FROM memory_versions WHERE id = NEW.version_id));
    RETURN NEW;
END
$$;
