-- Skills (issue 20): immutable versions of a bundle of files, kept in the
-- database with who uploaded them.
CREATE TABLE skills (
	id TEXT PRIMARY KEY,
	name TEXT NOT NULL,
	display_name TEXT NOT NULL,
	latest_version_id TEXT NOT NULL,
	created_by_kind TEXT NOT NULL,
	created_by_id TEXT NOT NULL,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL
);

CREATE TABLE skill_versions (
	id TEXT PRIMARY KEY,
	skill_id TEXT NOT NULL REFERENCES skills (id) ON DELETE CASCADE,
	name TEXT NOT NULL,
	description TEXT NOT NULL,
	created_by_kind TEXT NOT NULL,
	created_by_id TEXT NOT NULL,
	created_at TEXT NOT NULL
);
CREATE INDEX skill_versions_skill ON skill_versions (skill_id, id);

CREATE TABLE skill_files (
	version_id TEXT NOT NULL REFERENCES skill_versions (id) ON DELETE CASCADE,
	path TEXT NOT NULL,
	content BLOB NOT NULL,
	PRIMARY KEY (version_id, path)
);
