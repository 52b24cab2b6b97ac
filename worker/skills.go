package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"strings"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/confined"
	"github.com/memstore/memstore/internal/skillarchive"
)

// A session's agent may name skills: folders of instructions (SKILL.md)
// and scripts. Before the first tool call the worker puts each one's
// files, at the version the session pinned, in <room>/skills/<name>/,
// where the agent's prompt says they are; the shell sees them read-only;
// and the folders go when the item ends, so the next session on this
// worker does not find them. This is what the official SDK's environment
// worker does, against memstore and Anthropic's API alike.

// skillsDir is the folder of a room that holds the session's skills.
const skillsDir = "skills"

// skillEntry is an agent's skills entry as the session shows it.
type skillEntry struct {
	Type    string `json:"type"`
	SkillID string `json:"skill_id"`
	Version string `json:"version"`
}

// bringSkills downloads the session's skills into room and returns the
// names of the folders it made (each to be removed at the end, even a
// half-made one). A skill that cannot be brought is logged and left out,
// as the official worker does: the session runs without it rather than
// not at all.
func (w *Worker) bringSkills(ctx context.Context, c *client.Client, sess *api.Session, room string, log *slog.Logger) []string {
	if len(sess.Agent.Skills) == 0 {
		return nil
	}
	root, err := confined.Open(room)
	if err != nil {
		log.Error("the session's skills could not be brought: its room cannot be opened", "path", room, "err", err)
		return nil
	}
	root = root.WithoutSync() // a copy of the server's files, gone with the room
	var brought []string
	for _, raw := range sess.Agent.Skills {
		var e skillEntry
		if err := json.Unmarshal(raw, &e); err != nil || e.SkillID == "" {
			log.Warn("skipping a skills entry of the session's agent that names no skill", "entry", string(raw))
			continue
		}
		skLog := log.With("skill_id", e.SkillID)
		name, err := bringSkill(ctx, c, root, e, brought, skLog)
		if name != "" {
			brought = append(brought, name)
		}
		if err != nil {
			if name != "" {
				removeSkill(room, name, skLog)
				brought = brought[:len(brought)-1]
			}
			skLog.Error("a skill of the session's agent could not be brought; the session runs without it", "err", err,
				"fix", "check the skill and its version exist (GET /v1/skills/"+e.SkillID+"/versions) and that this worker's credential may read it")
			continue
		}
	}
	return brought
}

// bringSkill downloads one skill version and writes its files under
// skills/<name>/ through root. name is set as soon as the folder may
// exist, so the caller removes whatever a failure left.
func bringSkill(ctx context.Context, c *client.Client, root *confined.Root, e skillEntry, taken []string, log *slog.Logger) (name string, err error) {
	v, err := c.GetSkillVersion(ctx, e.SkillID, cmp.Or(e.Version, "latest"))
	if err != nil {
		return "", fmt.Errorf("read version %q of skill %s: %w", cmp.Or(e.Version, "latest"), e.SkillID, err)
	}
	if err := checkSkillName(v.Name); err != nil {
		return "", err
	}
	for _, t := range taken {
		if t == v.Name {
			return "", fmt.Errorf("another skill of this session is already named %q; each skill needs a folder of its own", v.Name)
		}
	}
	files, err := downloadSkill(ctx, c, e.SkillID, v.ID)
	if err != nil {
		return "", err
	}
	dir := path.Join(skillsDir, v.Name)
	if _, err := root.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s already exists in the session's room; it is left alone", dir)
	}
	for _, f := range files {
		if err := root.WriteFile(path.Join(dir, f.Path), f.Content, confined.Precondition{Absent: true}); err != nil {
			return v.Name, fmt.Errorf("write %s: %w", path.Join(dir, f.Path), err)
		}
	}
	if err := sealSkill(root.Dir(), v.Name, files); err != nil {
		return v.Name, err
	}
	log.Info("skill brought into the session's room", "skill_version_id", v.ID, "path", path.Join(root.Dir(), dir), "files", len(files))
	return v.Name, nil
}

// checkSkillName refuses a name that is not one plain folder name: the
// server chose it, and it must not pick where the files go.
func checkSkillName(name string) error {
	if name == "" || name == "." || name == ".." || strings.HasPrefix(name, ".") || strings.ContainsAny(name, "/\\\x00") || len(name) > 255 {
		return fmt.Errorf("the server named the skill %q, which is not a plain folder name; refused", name)
	}
	return nil
}

// downloadSkill fetches the version's archive into a temporary file (zip
// needs to seek) and checks it whole (package skillarchive).
func downloadSkill(ctx context.Context, c *client.Client, skillID, versionID string) ([]skillarchive.File, error) {
	body, err := c.DownloadSkillVersion(ctx, skillID, versionID)
	if err != nil {
		return nil, fmt.Errorf("download version %s of skill %s: %w", versionID, skillID, err)
	}
	defer body.Close()
	tmp, err := os.CreateTemp("", "memstore-skill-*")
	if err != nil {
		return nil, fmt.Errorf("keep the skill's archive in a temporary file: %w (set TMPDIR to a writable folder)", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	n, err := io.Copy(tmp, io.LimitReader(body, skillarchive.DefaultLimits.Bytes+1))
	if err != nil {
		return nil, fmt.Errorf("download version %s of skill %s: %w", versionID, skillID, err)
	}
	if n > skillarchive.DefaultLimits.Bytes {
		return nil, fmt.Errorf("the archive of version %s of skill %s is over %d bytes; refused", versionID, skillID, skillarchive.DefaultLimits.Bytes)
	}
	files, err := skillarchive.Read(tmp, n, skillarchive.DefaultLimits)
	if err != nil {
		return nil, fmt.Errorf("version %s of skill %s: %w", versionID, skillID, err)
	}
	return files, nil
}

// sealSkill makes a brought skill read-only (files 0444, or 0555 when the
// archive marked them executable; folders 0555), so that even an
// unsandboxed shell does not edit it by accident. os.Root keeps every
// change inside the room. The agent has not run yet: nothing in the
// folder is its doing.
func sealSkill(room, name string, files []skillarchive.File) error {
	r, err := os.OpenRoot(room)
	if err != nil {
		return err
	}
	defer r.Close()
	dirs := map[string]bool{}
	for _, f := range files {
		p := path.Join(skillsDir, name, f.Path)
		mode := fs.FileMode(0o444)
		if f.Executable {
			mode = 0o555
		}
		if err := r.Chmod(p, mode); err != nil {
			return err
		}
		for d := path.Dir(p); d != skillsDir && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		if err := r.Chmod(d, 0o555); err != nil {
			return err
		}
	}
	return nil
}

// removeSkills removes exactly the skill folders bringSkills made, and the
// skills folder when that leaves it empty.
func removeSkills(room string, names []string, log *slog.Logger) {
	for _, name := range names {
		removeSkill(room, name, log)
	}
	if len(names) > 0 {
		if r, err := os.OpenRoot(room); err == nil {
			r.Remove(skillsDir) // fails, as it should, when the agent put something else there
			r.Close()
		}
	}
}

// removeSkill removes skills/<name> of room, making its folders writable
// first (they were sealed read-only). os.Root keeps the removal inside the
// room even if the agent swapped a folder for a link.
func removeSkill(room, name string, log *slog.Logger) {
	dir := path.Join(skillsDir, name)
	r, err := os.OpenRoot(room)
	if err != nil {
		log.Warn("a skill's folder could not be removed: the room cannot be opened", "path", path.Join(room, dir), "err", err)
		return
	}
	defer r.Close()
	if err := r.RemoveAll(dir); err != nil {
		fs.WalkDir(r.FS(), dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				r.Chmod(p, 0o700)
			}
			return nil
		})
		if err := r.RemoveAll(dir); err != nil {
			log.Warn("a skill's folder could not be removed", "path", path.Join(room, dir), "err", err, "fix", "remove it by hand")
		}
	}
}
