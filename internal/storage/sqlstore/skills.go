package sqlstore

import (
	"context"
	"fmt"

	"github.com/memstore/memstore/internal/storage"
)

const skillColumns = `id, name, display_name, latest_version_id, created_by_kind, created_by_id, created_at, updated_at`

func scanSkill(r Row) (storage.SkillRow, error) {
	var s storage.SkillRow
	err := r.Scan(&s.ID, &s.Name, &s.DisplayName, &s.LatestVersionID, &s.CreatedBy.Kind, &s.CreatedBy.ID, &s.CreatedAt, &s.UpdatedAt)
	return s, err
}

const skillVersionColumns = `id, skill_id, name, description, created_by_kind, created_by_id, created_at`

func scanSkillVersion(r Row) (storage.SkillVersionRow, error) {
	var v storage.SkillVersionRow
	err := r.Scan(&v.ID, &v.SkillID, &v.Name, &v.Description, &v.CreatedBy.Kind, &v.CreatedBy.ID, &v.CreatedAt)
	return v, err
}

func scanSkillFile(r Row) (storage.SkillFile, error) {
	var f storage.SkillFile
	err := r.Scan(&f.Path, &f.Content)
	return f, err
}

// insertSkillVersion writes a version row and its files.
func insertSkillVersion(ctx context.Context, q Conn, v storage.SkillVersionRow) error {
	if _, err := q.Exec(ctx, `INSERT INTO skill_versions (`+skillVersionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		v.ID, v.SkillID, v.Name, v.Description, v.CreatedBy.Kind, v.CreatedBy.ID, v.CreatedAt); err != nil {
		return fmt.Errorf("create skill version %s: %w", v.ID, err)
	}
	for _, f := range v.Files {
		if _, err := q.Exec(ctx, `INSERT INTO skill_files (version_id, path, content) VALUES (?, ?, ?)`, v.ID, f.Path, f.Content); err != nil {
			return fmt.Errorf("store skill file %s of version %s: %w", f.Path, v.ID, err)
		}
	}
	return nil
}

// CreateSkill implements storage.Skills. The database's clock stamps both
// rows, as every other write.
func (s *Store) CreateSkill(ctx context.Context, sk storage.SkillRow, first storage.SkillVersionRow) (storage.SkillRow, error) {
	err := s.write(ctx, func(tx *tx) error {
		now, err := s.b.Now(ctx, tx)
		if err != nil {
			return err
		}
		sk.CreatedAt, sk.UpdatedAt, sk.LatestVersionID = now, now, first.ID
		first.SkillID, first.CreatedAt = sk.ID, now
		if _, err := tx.Exec(ctx, `INSERT INTO skills (`+skillColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			sk.ID, sk.Name, sk.DisplayName, sk.LatestVersionID, sk.CreatedBy.Kind, sk.CreatedBy.ID, sk.CreatedAt, sk.UpdatedAt); err != nil {
			return fmt.Errorf("create skill %s: %w", sk.ID, err)
		}
		return insertSkillVersion(ctx, tx, first)
	})
	return sk, err
}

// CreateSkillVersion implements storage.Skills. The skill row is locked so
// that two uploads to one skill settle its latest version one after the
// other.
func (s *Store) CreateSkillVersion(ctx context.Context, v storage.SkillVersionRow) (storage.SkillVersionRow, error) {
	err := s.write(ctx, func(tx *tx) error {
		if _, err := scanSkill(tx.QueryRow(ctx, `SELECT `+skillColumns+` FROM skills WHERE id = ?`+s.lock(true), v.SkillID)); err != nil {
			return err
		}
		now, err := s.b.Now(ctx, tx)
		if err != nil {
			return err
		}
		v.CreatedAt = now
		if err := insertSkillVersion(ctx, tx, v); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE skills SET latest_version_id = ?, updated_at = ? WHERE id = ?`, v.ID, now, v.SkillID)
		return err
	})
	v.Files = nil
	return v, err
}

// GetSkill implements storage.Skills.
func (s *Store) GetSkill(ctx context.Context, id string) (storage.SkillRow, error) {
	return scanSkill(s.db().QueryRow(ctx, `SELECT `+skillColumns+` FROM skills WHERE id = ?`, id))
}

// ListSkills implements storage.Skills.
func (s *Store) ListSkills(ctx context.Context, q storage.ListQuery) ([]storage.SkillRow, error) {
	return queryAll(ctx, s.db(), scanSkill, `SELECT `+skillColumns+` FROM skills WHERE (? = '' OR id < ?) ORDER BY id DESC LIMIT ?`,
		q.After, q.After, limitArg(q.Limit))
}

// DeleteSkill implements storage.Skills; versions and files go with it
// (ON DELETE CASCADE).
func (s *Store) DeleteSkill(ctx context.Context, id string) error {
	n, err := s.db().Exec(ctx, `DELETE FROM skills WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete skill %s: %w", id, err)
	}
	if n == 0 {
		return storage.ErrNotFound
	}
	return nil
}

// GetSkillVersion implements storage.Skills.
func (s *Store) GetSkillVersion(ctx context.Context, skillID, id string) (storage.SkillVersionRow, error) {
	return scanSkillVersion(s.db().QueryRow(ctx, `SELECT `+skillVersionColumns+` FROM skill_versions WHERE skill_id = ? AND id = ?`, skillID, id))
}

// ListSkillVersions implements storage.Skills. The skill's existence and
// its versions are read in one snapshot.
func (s *Store) ListSkillVersions(ctx context.Context, skillID string, q storage.ListQuery) ([]storage.SkillVersionRow, error) {
	var out []storage.SkillVersionRow
	err := s.read(ctx, func(c Conn) error {
		if ok, err := exists(ctx, c, `SELECT 1 FROM skills WHERE id = ?`, skillID); err != nil || !ok {
			if err == nil {
				err = storage.ErrNotFound
			}
			return err
		}
		var err error
		out, err = queryAll(ctx, c, scanSkillVersion, `SELECT `+skillVersionColumns+` FROM skill_versions WHERE skill_id = ? AND (? = '' OR id < ?) ORDER BY id DESC LIMIT ?`,
			skillID, q.After, q.After, limitArg(q.Limit))
		return err
	})
	return out, err
}

// SkillVersionFiles implements storage.Skills.
func (s *Store) SkillVersionFiles(ctx context.Context, skillID, id string) ([]storage.SkillFile, error) {
	var out []storage.SkillFile
	err := s.read(ctx, func(c Conn) error {
		if ok, err := exists(ctx, c, `SELECT 1 FROM skill_versions WHERE skill_id = ? AND id = ?`, skillID, id); err != nil || !ok {
			if err == nil {
				err = storage.ErrNotFound
			}
			return err
		}
		var err error
		out, err = queryAll(ctx, c, scanSkillFile, `SELECT path, content FROM skill_files WHERE version_id = ? ORDER BY path`, id)
		return err
	})
	return out, err
}

// DeleteSkillVersion implements storage.Skills.
func (s *Store) DeleteSkillVersion(ctx context.Context, skillID, id string) error {
	return s.write(ctx, func(tx *tx) error {
		if _, err := scanSkill(tx.QueryRow(ctx, `SELECT `+skillColumns+` FROM skills WHERE id = ?`+s.lock(true), skillID)); err != nil {
			return err
		}
		versions, err := queryAll(ctx, tx, scanSkillVersion, `SELECT `+skillVersionColumns+` FROM skill_versions WHERE skill_id = ? ORDER BY id DESC`, skillID)
		if err != nil {
			return err
		}
		latest := ""
		found := false
		for _, v := range versions {
			if v.ID == id {
				found = true
			} else if latest == "" {
				latest = v.ID
			}
		}
		switch {
		case !found:
			return storage.ErrNotFound
		case latest == "":
			return storage.ErrLastSkillVersion
		}
		if _, err := tx.Exec(ctx, `DELETE FROM skill_versions WHERE id = ?`, id); err != nil {
			return fmt.Errorf("delete skill version %s: %w", id, err)
		}
		_, err = tx.Exec(ctx, `UPDATE skills SET latest_version_id = ? WHERE id = ?`, latest, skillID)
		return err
	})
}
