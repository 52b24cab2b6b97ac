-- Memory stores, their memories and the immutable versions of those
-- memories (SPEC §2).
--
-- Paths compare byte-wise (SQLite's BINARY collation on UTF-8 text), which is
-- the listing order of the API and what makes a directory a contiguous key
-- range: everything under "/a/" lies in ["/a/", "/a0") because '0' follows
-- '/' in ASCII.
CREATE TABLE memory_stores (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    description  TEXT NOT NULL DEFAULT '',
    metadata     TEXT NOT NULL DEFAULT '{}', -- JSON object of strings
    -- Live memories, kept in step by every create and delete so the
    -- per-store limit costs one row read instead of a count.
    memory_count INTEGER NOT NULL DEFAULT 0,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    archived_at  TEXT
);

-- The live memories. Content lives only in memory_versions (the head version
-- is never redactable), so a 100 KB memory is stored once, and a basic
-- listing reads nothing but this table's path index.
CREATE TABLE memories (
    id                 TEXT PRIMARY KEY,
    store_id           TEXT NOT NULL REFERENCES memory_stores (id) ON DELETE CASCADE,
    path               TEXT NOT NULL,
    content_sha256     TEXT NOT NULL,
    content_size_bytes INTEGER NOT NULL,
    version_id         TEXT NOT NULL,
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL
);
-- One memory per path, and the index every listing, prefix range and
-- conflict check walks.
CREATE UNIQUE INDEX memories_store_path ON memories (store_id, path);

-- Every change to a memory, newest id last. Rows outlive their memory; only
-- redaction changes one (content, hash, size and path become NULL).
CREATE TABLE memory_versions (
    id                 TEXT PRIMARY KEY,
    store_id           TEXT NOT NULL REFERENCES memory_stores (id) ON DELETE CASCADE,
    memory_id          TEXT NOT NULL,
    operation          TEXT NOT NULL CHECK (operation IN ('created', 'modified', 'deleted')),
    path               TEXT,
    content            BLOB,
    content_sha256     TEXT,
    content_size_bytes INTEGER,
    created_at         TEXT NOT NULL,
    created_by_type    TEXT NOT NULL,
    created_by_id      TEXT NOT NULL,
    redacted_at        TEXT,
    redacted_by_type   TEXT,
    redacted_by_id     TEXT
);
-- Newest-first listing of a store, and the cascade on store delete.
CREATE INDEX memory_versions_store ON memory_versions (store_id, id);
-- The memory_id filter (a memory's history, also after it was deleted).
CREATE INDEX memory_versions_memory ON memory_versions (memory_id, id);
-- The session_id / api_key_id filters.
CREATE INDEX memory_versions_actor ON memory_versions (store_id, created_by_id, id);
