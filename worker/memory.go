package worker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/toolset"
	"github.com/memstore/memstore/memsync"
)

// checkMemory refuses, when the worker is built rather than at each
// session, a memory configuration that every session with stores would
// fail on: an interval or a deletion mode memsync refuses (memsync owns
// those rules and their messages), or a remapped mount root that is not a
// folder the worker can create folders in. Found only at mount time, a
// typo in --mount-root would fail one session after another, and each
// would wait idle until a person re-queued it.
func checkMemory(cfg Config) error {
	if _, err := memsync.NewSession(memsync.SessionConfig{Interval: cfg.MemorySyncInterval, Deletions: cfg.MemorySyncDeletions}); err != nil {
		return err
	}
	if cfg.MemorySyncInterval < 0 || cfg.OnWork != nil || !remapped(cfg.MountRoot) {
		return nil
	}
	return checkMountRoot(cfg.MountRoot)
}

// remapped reports whether root moves mount paths away from where the
// server says they are.
func remapped(root string) bool {
	return root != "" && filepath.Clean(root) != api.DefaultMountPrefix
}

// checkMountRoot says what keeps root from holding the stores' folders,
// and what to do about it; nil when it can. It never creates root: a
// mistyped path must not become a folder tree.
func checkMountRoot(root string) error {
	fix := fixFor(root)
	fi, err := os.Stat(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("the mount root %s does not exist; %s", root, fix)
	case err != nil:
		return fmt.Errorf("the mount root %s cannot be looked at (%v); %s", root, err, fix)
	case !fi.IsDir():
		return fmt.Errorf("the mount root %s is not a folder; pass a folder with --mount-root", root)
	}
	if err := unix.Access(root, unix.W_OK|unix.X_OK); err != nil {
		return fmt.Errorf("the worker's user cannot create folders in the mount root %s (%v); %s", root, err, fix)
	}
	return nil
}

// memory is an item's memsync session, which also reports in one log line
// what the end of the session did.
type memory struct {
	*memsync.Session
	log *slog.Logger
	// sessionRoot is the session's own mount root under the worker's,
	// removed at End once memsync has removed the stores' folders; empty
	// when the stores live in the worker's mount root itself.
	sessionRoot string
	// release lets go of the shared folders an unsandboxed session holds
	// (Worker.claimShared), once End has removed them.
	release func()
}

// openMemory prepares the memory of a session: nil when it has no stores
// or memory is disabled, otherwise a memsync session over the remapped
// folders and the toolset mounts that expose them (ctx carries the item's
// trace, the parent of its sync spans). A session with stores
// whose secret has no sessions token fails here (ErrNoSessionsToken).
func (w *Worker) openMemory(ctx context.Context, c *client.Client, sess *api.Session, token string, log *slog.Logger) (*memory, []toolset.Mount, error) {
	var stores []memsync.StoreMount
	var ids []string
	for _, r := range sess.Resources {
		if r.Type != api.ResourceMemoryStore {
			continue
		}
		stores = append(stores, memsync.StoreMount{
			MemoryStoreID: r.MemoryStoreID, Name: r.Name, MountPath: r.MountPath,
			ReadOnly: r.Access == api.AccessReadOnly,
		})
		ids = append(ids, r.MemoryStoreID)
	}
	if len(stores) == 0 {
		return nil, nil, nil
	}
	if w.cfg.MemorySyncInterval < 0 {
		log.Info("memory disabled by a negative memory sync interval; the session runs without its memory stores", "memory_store_ids", ids)
		return nil, nil, nil
	}
	if token == "" {
		// Documented in docs/worker.md's troubleshooting table: keep the
		// message stable.
		log.Error("work item failed: the session has memory stores but the work secret carries no sessions token",
			"memory_store_ids", ids,
			"fix", "serve the item with the secret the poll returned (ANTHROPIC_WORK_SECRET or --work-secret-file), or set --memory-sync-interval=-1 to run it without memory")
		return nil, nil, fmt.Errorf("session %s: %w", sess.ID, ErrNoSessionsToken)
	}
	root, sessionRoot, release, err := w.mountRootFor(sess.ID, stores, log)
	if err != nil {
		log.Error("work item failed: the session's own mount root cannot be made", "err", err)
		return nil, nil, err
	}
	mem := &memory{log: log, sessionRoot: sessionRoot, release: release}
	defer func() {
		if mem.Session == nil {
			release()
		}
	}()
	mounts := make([]toolset.Mount, len(stores))
	for i := range stores {
		dir, err := mountDir(stores[i].MountPath, root)
		if err != nil {
			log.Error("work item failed: a memory store's mount path cannot be used", "memory_store_id", stores[i].MemoryStoreID, "mount_path", stores[i].MountPath, "err", err)
			return nil, nil, fmt.Errorf("memory store %s: %w", stores[i].MemoryStoreID, err)
		}
		stores[i].Dir = dir
		mounts[i] = toolset.Mount{Path: stores[i].MountPath, Dir: dir, ReadOnly: stores[i].ReadOnly}
	}
	s, err := memsync.NewSession(memsync.SessionConfig{
		Client: c, Stores: stores, SessionID: sess.ID, Interval: w.cfg.MemorySyncInterval, Deletions: w.cfg.MemorySyncDeletions,
		Now: w.cfg.Now, Logger: log, FaultPoint: w.cfg.FaultPoint, OnSync: w.synced(ctx),
	})
	if err != nil {
		log.Error("work item failed: memory sync could not be set up", "err", err)
		return nil, nil, err
	}
	mem.Session = s
	return mem, mounts, nil
}

// mountRootFor is the mount root of one session's stores, and what lets go
// of it. Without a sandbox it is the worker's own, where the agent's bash
// finds each store at its real path, unless another session of this worker
// holds one of the same stores there: then, and always with a sandbox, it
// is a folder named after the session inside the root (made here, mode
// 0700), so that two sessions of one store get two folders and run side by
// side. The sandbox shows each agent its own at the store's mount path;
// without it, the file tools map the mount path to it, and bash finds it
// under the session's folder (logged). A session id cannot be a store's
// slug (slugs have no "_"). An existing folder is a leftover of the same
// session served before: memsync adopts a store folder left in it whose
// sync journal matches, and refuses any other.
func (w *Worker) mountRootFor(sessionID string, stores []memsync.StoreMount, log *slog.Logger) (root, sessionRoot string, release func(), err error) {
	release = func() {}
	dir, err := w.sessionFolder(sessionID)
	if err != nil {
		return "", "", nil, err
	}
	_, lerr := os.Lstat(dir)
	if w.sandbox == nil && lerr != nil {
		var shared []string
		for _, s := range stores {
			if dir, err := mountDir(s.MountPath, w.cfg.MountRoot); err == nil {
				shared = append(shared, dir)
			}
		}
		if rel, ok := w.claimShared(shared); ok {
			return w.cfg.MountRoot, "", rel, nil
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", "", nil, fmt.Errorf("create %s, where this session's stores are mounted (%v); %s", dir, err, fixFor(filepath.Dir(dir)))
	}
	if w.sandbox == nil && lerr != nil {
		log.Info("another session of this worker has one of these stores mounted in the shared folder; this session's stores are mounted in a folder of its own (the file tools reach them at their mount paths, bash under this folder; a sandbox shows them at their mount paths)",
			"path", dir)
	}
	return dir, dir, release, nil
}

// sessionFolder is where a sandboxed session's stores are mounted (see
// mountRootFor), without making it.
func (w *Worker) sessionFolder(sessionID string) (string, error) {
	base := w.cfg.MountRoot
	if !remapped(base) {
		base = api.DefaultMountPrefix
	}
	if sessionID == "" || sessionID != filepath.Base(sessionID) || strings.HasPrefix(sessionID, ".") {
		return "", fmt.Errorf("session id %q cannot name a folder", sessionID)
	}
	return filepath.Join(base, sessionID), nil
}

// fixFor says how to make root a folder the worker can create folders in.
func fixFor(root string) string {
	return fmt.Sprintf(`create it and give the worker's user write access (sudo mkdir -p %q && sudo chown "$USER" %q), or pass another folder with --mount-root`, root, root)
}

// finishLeftovers finishes the memory of a session that terminated while
// its worker was gone (killed during the final sync, say): the folders it
// left are adopted, synced a last time, flushed and removed, so that what
// the agent wrote reaches the server even though no tool runs any more.
// Stores without a leftover folder are not mounted at all.
func (w *Worker) finishLeftovers(ctx context.Context, c *client.Client, sess *api.Session, token string, log *slog.Logger) {
	// Where the session's stores were mounted: the mount root, or with a
	// sandbox the session's own folder in it.
	root := w.cfg.MountRoot
	if dir, err := w.sessionFolder(sess.ID); err != nil {
		return
	} else if _, err := os.Lstat(dir); w.sandbox != nil || err == nil {
		root = dir
	}
	left := *sess
	left.Resources = nil
	for _, r := range sess.Resources {
		if r.Type != api.ResourceMemoryStore {
			continue
		}
		if dir, err := mountDir(r.MountPath, root); err == nil {
			if _, err := os.Lstat(dir); err == nil {
				left.Resources = append(left.Resources, r)
			}
		}
	}
	if len(left.Resources) == 0 {
		return
	}
	mem, _, err := w.openMemory(ctx, c, &left, token, log)
	if err != nil || mem == nil {
		return
	}
	if err := mem.Mount(ctx); err == nil {
		log.Info("the session ended while its memory folders were left behind; finishing them: a last sync, a flush, then removal")
	}
	mem.End(context.WithoutCancel(ctx), true)
}

// afterCall is the memory's part of the end of a tool call. In live mode
// (memsync.Session.StartLive) it only queues work: the upload of each
// memory file the call wrote (the toolset's result names them), and the
// periodic sync if it is due, which then run beside the agent's next call.
// In inline mode Nudge is the sync that is due, run before the next call,
// as the official worker does.
func (m *memory) afterCall(ctx context.Context, res toolset.Result) {
	for _, p := range res.Wrote {
		m.Wrote(p)
	}
	m.Nudge(ctx)
}

// End ends the session's memory (memsync bounds it) and logs the outcome:
// a warning when an upload failed, was cut off by the time limit, or a
// folder had to be kept.
func (m *memory) End(ctx context.Context, clean bool) {
	rep := m.Session.End(ctx, clean)
	level := slog.LevelInfo
	if rep.FinalSync.Failed+rep.Flush.Failed+rep.FinalSync.CutOff+rep.Flush.CutOff > 0 || len(rep.Kept) > 0 {
		level = slog.LevelWarn
	}
	m.log.Log(ctx, level, "session memory finished",
		"clean_end", clean,
		"final_sync_changes", rep.FinalSync.Changes, "flush_changes", rep.Flush.Changes,
		"failed", rep.FinalSync.Failed+rep.Flush.Failed, "cut_off", rep.FinalSync.CutOff+rep.Flush.CutOff,
		"folders_removed", len(rep.Removed), "folders_kept", rep.Kept)
	m.release()
	if m.sessionRoot != "" && len(rep.Kept) == 0 {
		if err := os.Remove(m.sessionRoot); err != nil && !errors.Is(err, fs.ErrNotExist) {
			m.log.Warn("the session's own mount root could not be removed", "folder", m.sessionRoot, "err", err,
				"fix", "look at what is left in it, then remove it")
		}
	}
}

// mountDir is where a store advertised at mountPath lives on this host:
// the same path, or with its /mnt/memory prefix replaced by root (the
// worker's --mount-root, for tests and hosts where /mnt is not writable).
func mountDir(mountPath, root string) (string, error) {
	if !path.IsAbs(mountPath) || path.Clean(mountPath) != mountPath {
		return "", fmt.Errorf("mount_path %q is not a clean absolute path", mountPath)
	}
	if !remapped(root) {
		return mountPath, nil
	}
	rest, ok := strings.CutPrefix(mountPath, api.DefaultMountPrefix)
	if !ok || (rest != "" && rest[0] != '/') {
		return "", fmt.Errorf("mount_path %s is not under %s, so --mount-root %s cannot remap it; run the worker without --mount-root, or configure the server to mount under %s", mountPath, api.DefaultMountPrefix, root, api.DefaultMountPrefix)
	}
	return filepath.Join(root, filepath.FromSlash(rest)), nil
}
