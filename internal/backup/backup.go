// Package backup packs what a memstore data folder needs to be served
// again — the SQLite database, copied consistently while the server runs,
// and the files beside it (admin.key, up.json) — into one file, checks such
// a file, and restores it into a fresh folder. One file, because an
// operator copies one file off the machine; a manifest of checksums inside
// it, because a backup that cannot be verified is a hope, not a backup.
package backup

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/memstore/memstore/internal/storage/sqlite"
)

// Database is the name of the SQLite file in a data folder (as serve
// names it).
const Database = "memstore.db"

// sideFiles are the other files of a data folder that a restored server
// needs: the admin key the CLI reads, and `up`'s environment and its key.
// The worker's folders (workdir/, memory/) are working copies that a
// worker rebuilds from the server, so they are not backed up.
var sideFiles = []string{"admin.key", "up.json"}

// format names the file format in its manifest.
const format = "memstore-backup/1"

// manifestName is the archive's first entry.
const manifestName = "manifest.json"

// Manifest describes a backup: when it was taken and every file in it.
type Manifest struct {
	Format    string    `json:"format"`
	CreatedAt time.Time `json:"created_at"`
	// Migrations is how many schema migrations the database had applied.
	Migrations int    `json:"migrations"`
	Files      []File `json:"files"`
}

// File is one file of a backup.
type File struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Create backs up the data folder dataDir into a new file to (refused if
// it exists). The database is copied with sqlite.Backup, so the server may
// keep running on dataDir: the backup holds every write committed before
// the copy began. The file appears under its name only once complete.
func Create(ctx context.Context, dataDir, to string) (*Manifest, error) {
	dbPath := filepath.Join(dataDir, Database)
	if _, err := os.Stat(dbPath); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s has no %s: point --data at the folder `memstore serve --data` uses (a server on PostgreSQL is backed up with pg_dump instead)", dataDir, Database)
	}
	if _, err := os.Lstat(to); err == nil {
		return nil, fmt.Errorf("%s already exists; give --to a new file name (a backup never overwrites one)", to)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(to), ".memstore-backup-")
	if err != nil {
		return nil, fmt.Errorf("make a work folder beside %s: %w", to, err)
	}
	defer os.RemoveAll(tmp)
	if err := sqlite.Backup(ctx, dbPath, filepath.Join(tmp, Database)); err != nil {
		return nil, err
	}
	m := &Manifest{Format: format, CreatedAt: time.Now().UTC()}
	if m.Migrations, err = sqlite.Check(ctx, filepath.Join(tmp, Database)); err != nil {
		return nil, fmt.Errorf("the copy of the database failed its check: %w", err)
	}
	sources := map[string]string{Database: filepath.Join(tmp, Database)}
	for _, name := range sideFiles {
		p := filepath.Join(dataDir, name)
		if _, err := os.Stat(p); err == nil {
			sources[name] = p
		}
	}
	for _, name := range slices.Sorted(maps.Keys(sources)) {
		f, err := describe(name, sources[name])
		if err != nil {
			return nil, err
		}
		m.Files = append(m.Files, f)
	}
	part := filepath.Join(tmp, "backup.partial")
	if err := write(part, m, sources); err != nil {
		return nil, fmt.Errorf("write %s: %w", to, err)
	}
	// Link, not rename: a file that appeared at to meanwhile is not
	// replaced.
	if err := os.Link(part, to); err != nil {
		return nil, fmt.Errorf("put the backup at %s: %w", to, err)
	}
	return m, syncDir(filepath.Dir(to))
}

// describe reads a file's size and checksum.
func describe(name, path string) (File, error) {
	f, err := os.Open(path)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return File{}, err
	}
	return File{Name: name, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// write makes the backup file: a gzipped tar of the manifest, then each
// file it lists, fsynced.
func write(path string, m *Manifest, sources map[string]string) error {
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	zw := gzip.NewWriter(out)
	tw := tar.NewWriter(zw)
	manifest, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: manifestName, Mode: 0o600, Size: int64(len(manifest)), ModTime: m.CreatedAt}); err != nil {
		return err
	}
	if _, err := tw.Write(manifest); err != nil {
		return err
	}
	for _, f := range m.Files {
		if err := tw.WriteHeader(&tar.Header{Name: f.Name, Mode: 0o600, Size: f.Size, ModTime: m.CreatedAt}); err != nil {
			return err
		}
		src, err := os.Open(sources[f.Name])
		if err != nil {
			return err
		}
		_, err = io.CopyN(tw, src, f.Size)
		src.Close()
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := out.Sync(); err != nil {
		return err
	}
	return out.Close()
}

// Verify checks a backup file whole: it reads to the end, every file the
// manifest lists is there with its size and checksum, nothing else is, and
// the database passes SQLite's integrity check. A truncated or damaged
// file is an error that says what is wrong.
func Verify(ctx context.Context, path string) (*Manifest, error) {
	tmp, err := os.MkdirTemp("", "memstore-verify-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	return extract(ctx, path, tmp)
}

// Restore verifies the backup file from and writes its files into dataDir,
// a folder that must not exist or be empty: a restore never mixes with or
// replaces a live data folder. dataDir appears only once complete.
func Restore(ctx context.Context, from, dataDir string) (*Manifest, error) {
	entries, err := os.ReadDir(dataDir)
	emptyFolder := err == nil && len(entries) == 0
	switch {
	case err == nil && len(entries) > 0:
		return nil, fmt.Errorf("%s is not empty; restore into a new folder (--data) and point `memstore serve --data` at it", dataDir)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	parent := filepath.Dir(filepath.Clean(dataDir))
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(parent, ".memstore-restore-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	m, err := extract(ctx, from, tmp)
	if err != nil {
		return nil, err
	}
	if emptyFolder {
		if err := os.Remove(dataDir); err != nil {
			return nil, err
		}
	}
	if err := os.Rename(tmp, dataDir); err != nil {
		return nil, fmt.Errorf("move the restored files to %s: %w", dataDir, err)
	}
	return m, syncDir(parent)
}

// extract reads the backup at path into dir, checking every file against
// the manifest and the database with sqlite.Check.
func extract(ctx context.Context, path, dir string) (*Manifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	damaged := func(format string, args ...any) error {
		return fmt.Errorf("%s is not a whole memstore backup: %s", path, fmt.Sprintf(format, args...))
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, damaged("%v", err)
	}
	tr := tar.NewReader(zr)
	h, err := tr.Next()
	if err != nil || h.Name != manifestName {
		return nil, damaged("it does not start with its manifest (%v)", err)
	}
	var m Manifest
	if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&m); err != nil {
		return nil, damaged("its manifest cannot be read: %v", err)
	}
	if m.Format != format {
		return nil, damaged("its format is %q, this memstore reads %q", m.Format, format)
	}
	want := map[string]File{}
	for _, fl := range m.Files {
		if fl.Name != filepath.Base(fl.Name) || fl.Name == manifestName {
			return nil, damaged("its manifest names the file %q", fl.Name)
		}
		want[fl.Name] = fl
	}
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, damaged("%v after %d of its %d files (truncated?)", err, len(seen), len(m.Files))
		}
		fl, ok := want[h.Name]
		if !ok || seen[h.Name] {
			return nil, damaged("it holds %q, which its manifest does not list", h.Name)
		}
		seen[h.Name] = true
		if err := copyChecked(tr, filepath.Join(dir, fl.Name), fl); err != nil {
			return nil, damaged("%s: %v", fl.Name, err)
		}
	}
	// The gzip trailer carries a checksum of everything: read to it.
	if _, err := io.Copy(io.Discard, zr); err != nil {
		return nil, damaged("%v (truncated?)", err)
	}
	for _, fl := range m.Files {
		if !seen[fl.Name] {
			return nil, damaged("%s is missing (truncated?)", fl.Name)
		}
	}
	if _, ok := want[Database]; !ok {
		return nil, damaged("it holds no %s", Database)
	}
	if _, err := sqlite.Check(ctx, filepath.Join(dir, Database)); err != nil {
		return nil, damaged("%v", err)
	}
	return &m, nil
}

// copyChecked writes r to path and checks its size and checksum.
func copyChecked(r io.Reader, path string, fl File) error {
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), r)
	if err != nil {
		return err
	}
	if n != fl.Size {
		return fmt.Errorf("%d bytes, the manifest says %d", n, fl.Size)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != fl.SHA256 {
		return fmt.Errorf("checksum %s, the manifest says %s", sum, fl.SHA256)
	}
	if err := out.Sync(); err != nil {
		return err
	}
	return out.Close()
}

// syncDir makes a new name in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
