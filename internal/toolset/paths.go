package toolset

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/memstore/memstore/internal/confined"
)

// area is one root the file tools may reach: the working directory or a
// memory store's folder.
type area struct {
	// mount is the store, or nil for the working directory.
	mount *Mount
	// real is the folder on disk, symlinks in it resolved once at New so
	// that a later per-call check can insist it is a plain directory.
	real string
	// prefixes are the absolute paths that name this root: the advertised
	// mount path (or the configured working directory) first, then the real
	// folder as configured and as resolved. An agent may use any of them.
	prefixes []string
}

// label names the area in messages the agent reads.
func (a *area) label() string {
	if a.mount == nil {
		return "the working directory"
	}
	return "the memory store mounted at " + a.mount.Path
}

// buildAreas turns the configuration into areas: the working directory
// first (relative paths resolve against its first prefix), then each mount.
func buildAreas(workdir string, mounts []Mount) ([]*area, error) {
	wd, err := newArea(nil, workdir)
	if err != nil {
		return nil, fmt.Errorf("toolset: working directory: %w", err)
	}
	areas := []*area{wd}
	seen := map[string]bool{}
	for i := range mounts {
		m := mounts[i]
		if !filepath.IsAbs(m.Path) || filepath.Clean(m.Path) != m.Path {
			return nil, fmt.Errorf("toolset: mount path %q must be absolute and clean", m.Path)
		}
		if m.Dir == "" {
			return nil, fmt.Errorf("toolset: mount %s has no folder (Mount.Dir)", m.Path)
		}
		if seen[m.Path] {
			return nil, fmt.Errorf("toolset: mount path %s is listed twice", m.Path)
		}
		seen[m.Path] = true
		a, err := newArea(&m, m.Dir)
		if err != nil {
			return nil, fmt.Errorf("toolset: mount %s: %w", m.Path, err)
		}
		a.prefixes = append([]string{m.Path}, a.prefixes...)
		areas = append(areas, a)
	}
	return areas, nil
}

func newArea(m *Mount, dir string) (*area, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	a := &area{mount: m, real: abs, prefixes: []string{abs}}
	// A folder that does not exist yet keeps its absolute path; the per-call
	// check reports it missing when a tool reaches for it.
	if resolved, err := filepath.EvalSymlinks(abs); err == nil && resolved != abs {
		a.real = resolved
		a.prefixes = append(a.prefixes, resolved)
	}
	return a, nil
}

// target is a path the agent named, mapped onto an area.
type target struct {
	area *area
	// prefix is the one of the area's prefixes the agent's path used, so
	// that paths in results stay in the agent's own terms (advertised mount
	// paths stay advertised).
	prefix string
	// rel is the slash-separated path inside the area's root; "." is the
	// root itself.
	rel string
}

// display turns a path inside the target's root into the absolute path the
// agent would use for it.
func (tg target) display(rel string) string {
	return filepath.Join(tg.prefix, filepath.FromSlash(rel))
}

// resolve maps p onto the area that holds it. A relative p resolves against
// the working directory; ".." is collapsed lexically, never by following
// anything on disk, and whatever lands outside every area is refused. When
// areas nest (a store folder inside the working directory) the innermost
// wins, so a read-only store stays read-only whichever way it is named.
func (t *Toolset) resolve(p string) (target, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return target{}, fmt.Errorf("path %q contains a NUL byte", p)
	}
	abs := filepath.Clean(p)
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(t.areas[0].prefixes[0], abs)
	}
	var best target
	for _, a := range t.areas {
		for _, prefix := range a.prefixes {
			if !within(abs, prefix) || (best.area != nil && len(prefix) <= len(best.prefix)) {
				continue
			}
			rel, err := filepath.Rel(prefix, abs)
			if err != nil {
				continue
			}
			best = target{area: a, prefix: prefix, rel: filepath.ToSlash(rel)}
		}
	}
	if best.area == nil {
		return target{}, fmt.Errorf("path %q is outside %s; the file tools can reach only those", p, t.reachable())
	}
	return best, nil
}

// reachable lists the roots for an error message.
func (t *Toolset) reachable() string {
	s := "the working directory (" + t.areas[0].prefixes[0] + ")"
	if len(t.areas) == 1 {
		return s
	}
	paths := make([]string, 0, len(t.areas)-1)
	for _, a := range t.areas[1:] {
		paths = append(paths, a.mount.Path)
	}
	return s + " and the memory stores (" + strings.Join(paths, ", ") + ")"
}

// within reports whether p is root or lies beneath it, comparing whole
// segments so /work does not contain /workshop.
func within(p, root string) bool {
	return p == root || strings.HasPrefix(p, strings.TrimSuffix(root, string(filepath.Separator))+string(filepath.Separator))
}

// opened is a target with its area's folder open through package
// confined and its path checked.
type opened struct {
	target
	root *confined.Root
	// info describes the target itself (not a link's target), or is nil
	// when it or one of its parents does not exist yet.
	info *confined.FileInfo
}

// open resolves p, opens its area's folder and checks every component of
// the path below it: none may be a symbolic link, and all but the last
// must be directories.
func (t *Toolset) open(p string) (*opened, error) {
	tg, err := t.resolve(p)
	if err != nil {
		return nil, err
	}
	root, err := tg.area.open()
	if err != nil {
		return nil, err
	}
	o := &opened{target: tg, root: root}
	if o.info, err = o.inspect(tg.rel); err != nil {
		return nil, err
	}
	return o, nil
}

// open opens the area's folder through package confined, which does every
// later read, write and walk in it without following a link anywhere. The
// folder itself is checked first, for a clear message: an agent with a
// shell could replace a store's folder with a link to anywhere (confined
// refuses it too, racing or not).
//
// The working directory is the agent's own: a file there may have several
// hard links (package managers link their caches into projects) and keeps
// its mode when rewritten. A memory store's folder is published by the
// sync, so a hard link there, which may share a file from outside, is
// refused, and every file is owner-only.
func (a *area) open() (*confined.Root, error) {
	before, err := os.Lstat(a.real)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s cannot be opened: %s", a.label(), fsErr(err))
	case before.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("%s has been replaced by a symbolic link; the file tools do not follow symbolic links", a.label())
	case !before.IsDir():
		return nil, fmt.Errorf("%s is not a directory", a.label())
	}
	root, err := confined.Open(a.real)
	if err != nil {
		return nil, fmt.Errorf("%s changed while it was being opened; try again", a.label())
	}
	if a.mount == nil {
		root = root.WithHardLinks().KeepingModes()
	}
	return root, nil
}

// inspect lstats each component of rel in turn. It refuses a symbolic link
// anywhere on the path and a non-directory before the last component, and
// returns the last component's info, or nil if the path does not exist (yet).
// Each step already refuses links on the way (package confined), so this
// walk is what names the component at fault in the agent's own terms; a
// link swapped in after it is refused by the operation itself.
func (o *opened) inspect(rel string) (*confined.FileInfo, error) {
	if rel == "." {
		fi, err := os.Lstat(o.area.real)
		if err != nil {
			return nil, fmt.Errorf("%s cannot be opened: %s", o.area.label(), fsErr(err))
		}
		return &confined.FileInfo{Mode: fi.Mode(), Size: fi.Size(), ModTime: fi.ModTime()}, nil
	}
	segs := strings.Split(rel, "/")
	var info confined.FileInfo
	for i := range segs {
		sub := strings.Join(segs[:i+1], "/")
		var err error
		info, err = o.root.Lstat(sub)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, confinedErr(o.display(sub), err)
		}
		if info.Mode&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s is a symbolic link; the file tools do not follow symbolic links (use bash to work with links)", o.display(sub))
		}
		if i < len(segs)-1 && !info.Mode.IsDir() {
			return nil, fmt.Errorf("%s is not a directory", o.display(sub))
		}
	}
	return &info, nil
}

// confinedErr words an error of package confined for the agent: the path
// it asked for, and what is wrong, without the host's paths.
func confinedErr(name string, err error) error {
	var pe *fs.PathError
	switch {
	case !errors.As(err, &pe):
	case errors.Is(err, confined.ErrNotRegular), errors.Is(err, confined.ErrSymlink), errors.Is(err, confined.ErrNotDirectory):
		return fmt.Errorf("%s: %v; the file tools do not follow links", name, pe.Err)
	case errors.Is(err, confined.ErrInvalidPath):
		return fmt.Errorf("%s: %v", name, pe.Err)
	}
	return fmt.Errorf("%s: %s", name, fsErr(err))
}

// fsErr turns a filesystem error into a short, stable phrase without the
// host's paths (the agent already knows which path it asked for, and a
// remapped store's real folder is none of its business).
func fsErr(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "no such file or directory"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	case errors.Is(err, syscall.ENOTDIR):
		return "not a directory"
	case errors.Is(err, syscall.EISDIR):
		return "is a directory"
	case errors.Is(err, syscall.ELOOP):
		return "too many levels of symbolic links"
	case errors.Is(err, syscall.ENOSPC):
		return "no space left on device"
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			break
		}
		err = next
	}
	return err.Error()
}
