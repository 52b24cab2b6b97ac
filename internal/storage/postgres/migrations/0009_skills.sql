-- Skills (issue 20): immutable versions of a bundle of files, kept in the
-- database with who uploaded them.
CREATE TABLE skills (
	id text PRIMARY KEY,
	name text NOT NULL,
	display_name text NOT NULL,
	latest_version_id text NOT NULL,
	created_by_kind text NOT NULL,
	created_by_id text NOT NULL,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL
);

CREATE TABLE skill_versions (
	id text PRIMARY KEY,
	skill_id text NOT NULL REFERENCES skills (id) ON DELETE CASCADE,
	name text NOT NULL,
	description text NOT NULL,
	created_by_kind text NOT NULL,
	created_by_id text NOT NULL,
	created_at timestamptz NOT NULL
);
CREATE INDEX skill_versions_skill ON skill_versions (skill_id, id);

CREATE TABLE skill_files (
	version_id text NOT NULL REFERENCES skill_versions (id) ON DELETE CASCADE,
	path text NOT NULL,
	content bytea NOT NULL,
	PRIMARY KEY (version_id, path)
);
