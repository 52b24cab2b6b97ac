-- Full-text search over every live memory's path and head content
-- (storage.Search): an FTS5 index written by triggers on memories, so each
-- memory write updates it in its own transaction, whichever code path
-- wrote, and a memory's deletion (or its store's, by cascade) removes it.
-- Only head versions are indexed, and a head version cannot be redacted,
-- so neither deleted nor redacted text is ever found.
--
-- An FTS5 row is addressed by an integer rowid. memories has none of its
-- own (VACUUM may renumber an implicit rowid), so memory_search_docs gives
-- each memory a stable one.
CREATE TABLE memory_search_docs (
    docid     INTEGER PRIMARY KEY,
    memory_id TEXT NOT NULL UNIQUE
);

-- The default unicode61 tokenizer: words are runs of letters and digits,
-- case- and accent-folded; a path "/notes/go-tips.md" holds the words
-- notes, go, tips and md.
CREATE VIRTUAL TABLE memory_search USING fts5(path, content);

-- The memories already stored.
INSERT INTO memory_search_docs (memory_id) SELECT id FROM memories ORDER BY id;
INSERT INTO memory_search (rowid, path, content)
    SELECT d.docid, m.path, CAST(v.content AS TEXT)
    FROM memory_search_docs d JOIN memories m ON m.id = d.memory_id JOIN memory_versions v ON v.id = m.version_id;

-- A memory write adds its version before it inserts or updates the
-- memory's row, so the head content is there to read.
CREATE TRIGGER memory_search_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memory_search_docs (memory_id) VALUES (new.id);
    INSERT INTO memory_search (rowid, path, content)
        SELECT d.docid, new.path, CAST(v.content AS TEXT)
        FROM memory_search_docs d, memory_versions v
        WHERE d.memory_id = new.id AND v.id = new.version_id;
END;

CREATE TRIGGER memory_search_update AFTER UPDATE OF path, version_id ON memories BEGIN
    DELETE FROM memory_search WHERE rowid = (SELECT docid FROM memory_search_docs WHERE memory_id = old.id);
    INSERT INTO memory_search (rowid, path, content)
        SELECT d.docid, new.path, CAST(v.content AS TEXT)
        FROM memory_search_docs d, memory_versions v
        WHERE d.memory_id = new.id AND v.id = new.version_id;
END;

CREATE TRIGGER memory_search_delete AFTER DELETE ON memories BEGIN
    DELETE FROM memory_search WHERE rowid = (SELECT docid FROM memory_search_docs WHERE memory_id = old.id);
    DELETE FROM memory_search_docs WHERE memory_id = old.id;
END;
