-- Full-text search over every live memory's path and head content
-- (storage.Search): a tsvector column on memories, filled by a trigger in
-- the transaction of each memory write whichever code path wrote, and
-- gone with the row when the memory (or its store) is deleted. Only head
-- versions are indexed, and a head version cannot be redacted, so neither
-- deleted nor redacted text is ever found.
--
-- Words are split as SQLite's FTS5 splits them: ASCII punctuation becomes
-- a space first (the default parser would otherwise keep "/a/b.md" or
-- "foo.bar" whole as a file or host name), and the 'simple' configuration
-- only lower-cases, with no stemming and no stop words. Path words weigh
-- most (A), content words least (D), in ts_rank.
-- memory_search_text is a memory's content as text: it is valid UTF-8,
-- but may hold NUL bytes, which text cannot; they become spaces.
CREATE FUNCTION memory_search_text(content bytea) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    at int;
BEGIN
    IF content IS NULL THEN
        RETURN '';
    END IF;
    LOOP
        at := position('\x00'::bytea IN content);
        EXIT WHEN at = 0;
        content := overlay(content PLACING '\x20'::bytea FROM at FOR 1);
    END LOOP;
    RETURN convert_from(content, 'UTF8');
END
$$;

CREATE FUNCTION memory_search_document(path text, content bytea) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT setweight(to_tsvector('simple', regexp_replace(path, '[[:punct:]]+', ' ', 'g')), 'A')
        || to_tsvector('simple', regexp_replace(memory_search_text(content), '[[:punct:]]+', ' ', 'g'))
$$;

ALTER TABLE memories ADD COLUMN search tsvector;

-- The memories already stored.
UPDATE memories m SET search = memory_search_document(m.path, v.content)
    FROM memory_versions v WHERE v.id = m.version_id;

-- A memory write adds its version before it inserts or updates the
-- memory's row, so the head content is there to read.
CREATE FUNCTION memory_search_fill() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.search := memory_search_document(NEW.path, (SELECT content FROM memory_versions WHERE id = NEW.version_id));
    RETURN NEW;
END
$$;

CREATE TRIGGER memory_search_fill BEFORE INSERT OR UPDATE OF path, version_id ON memories
    FOR EACH ROW EXECUTE FUNCTION memory_search_fill();

CREATE INDEX memories_search ON memories USING gin (search);
