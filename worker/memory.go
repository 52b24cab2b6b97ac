package worker

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"path/filepath"
	"strings"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/toolset"
)

// sessionMemory is what an item needs of its memory: memsync's Session.
type sessionMemory interface {
	Mount(ctx context.Context) error
	SyncIfDue(ctx context.Context)
	End(ctx context.Context, clean bool)
}

// storeMount is one attached store as the item mounts it.
type storeMount struct {
	MemoryStoreID string
	Name          string
	MountPath     string // advertised, what the agent is told
	Dir           string // where the files are on this host
	ReadOnly      bool
}

// openMemory prepares the memory of a session: nothing when it has no
// stores or memory is disabled, otherwise a memsync session over the
// remapped folders and the toolset mounts that expose them. A session with
// stores whose secret has no sessions token fails here (ErrNoSessionsToken).
func (w *Worker) openMemory(c *client.Client, sess *api.Session, token string, log *slog.Logger) (sessionMemory, []toolset.Mount, error) {
	var stores []storeMount
	var ids []string
	for _, r := range sess.Resources {
		if r.Type != api.ResourceMemoryStore {
			continue
		}
		stores = append(stores, storeMount{
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
		// Documented in the README's troubleshooting section: keep the
		// message stable.
		log.Error("work item failed: the session has memory stores but the work secret carries no sessions token",
			"memory_store_ids", ids,
			"fix", "serve the item with the secret the poll returned (ANTHROPIC_WORK_SECRET or --work-secret-file), or set --memory-sync-interval=-1 to run it without memory")
		return nil, nil, fmt.Errorf("session %s: %w", sess.ID, ErrNoSessionsToken)
	}
	mounts := make([]toolset.Mount, len(stores))
	for i := range stores {
		dir, err := mountDir(stores[i].MountPath, w.cfg.MountRoot)
		if err != nil {
			log.Error("work item failed: a memory store's mount path cannot be used", "memory_store_id", stores[i].MemoryStoreID, "path", stores[i].MountPath, "err", err)
			return nil, nil, fmt.Errorf("memory store %s: %w", stores[i].MemoryStoreID, err)
		}
		stores[i].Dir = dir
		mounts[i] = toolset.Mount{Path: stores[i].MountPath, Dir: dir, ReadOnly: stores[i].ReadOnly}
	}
	mem, err := w.newMemory(c, stores, log)
	if err != nil {
		log.Error("work item failed: memory sync could not be set up", "err", err)
		return nil, nil, err
	}
	return mem, mounts, nil
}

// mountDir is where a store advertised at mountPath lives on this host:
// the same path, or with its /mnt/memory prefix replaced by root (the
// worker's --mount-root, for tests and hosts where /mnt is not writable).
func mountDir(mountPath, root string) (string, error) {
	if !path.IsAbs(mountPath) || path.Clean(mountPath) != mountPath {
		return "", fmt.Errorf("mount_path %q is not a clean absolute path", mountPath)
	}
	if root == "" || filepath.Clean(root) == api.DefaultMountPrefix {
		return mountPath, nil
	}
	rest, ok := strings.CutPrefix(mountPath, api.DefaultMountPrefix)
	if !ok || (rest != "" && rest[0] != '/') {
		return "", fmt.Errorf("mount_path %s is not under %s, so --mount-root %s cannot remap it; run the worker without --mount-root, or configure the server to mount under %s", mountPath, api.DefaultMountPrefix, root, api.DefaultMountPrefix)
	}
	return filepath.Join(root, filepath.FromSlash(rest)), nil
}
