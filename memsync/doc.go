// Package memsync keeps a memory store's folder and the server's copy of the
// store in step while an agent session runs.
//
// A worker drives it through a [Session], one per agent session: Mount
// creates each store's folder with its marker and downloads the store;
// SyncIfDue, called after each tool call, syncs every store once the
// interval has passed; End runs a final sync (on a clean end), an
// upload-only flush, and removes the folders Mount created. Nothing a sync
// does fails the session: problems are logged, with the store, the folder
// and the path, and retried by the next sync.
//
// A sync cycle has three steps, the shape Mutagen uses:
//
//  1. Scan: [Scan] walks the folder through package confined (no symlink is
//     ever followed), hashes only the files whose stat changed, and checks
//     the folder's marker file. The server side is a content-free listing
//     ([Remote]: path → memory id and content_sha256).
//  2. Reconcile: [Reconcile] compares both sides with the [State] remembered
//     from the last sync and returns a [Plan]. It is a pure function — no
//     I/O, no clock (the time comes in [Options]) — so every rule is tested
//     as one described case in a table, and by property tests over random
//     inputs.
//  3. Apply: each [Action] carries what apply must re-check just before it
//     overwrites or deletes anything, on either side, so an edit made after
//     the scan is never lost; the state advances only for the actions that
//     succeeded (the Mark methods of [State]).
//
// The rules, per path, against the last synced content_sha256:
//
//   - changed only on the server: the server version is written to disk;
//   - changed only in the folder: uploaded — an update guarded by the
//     server's current content_sha256, or a create;
//   - changed on both sides: the server wins, the file is overwritten and a
//     warning logged (the agent's tool call itself succeeded, so the log is
//     the only trace);
//   - the same content on both sides: adopted, nothing transferred;
//   - deleted in the folder, unchanged on the server: deleted on the server,
//     guarded by the expected content_sha256, once the file has stayed gone
//     for a corroboration window (an editor's save-by-rename can make a file
//     vanish for a moment) — waived at the session's final sync — and at most
//     [DeleteCap] per sync; [DeletionsLogOnly] only logs it and
//     [DeletionsDisabled] keeps the memory;
//   - deleted in the folder, changed on the server: the server version is
//     restored;
//   - deleted on the server, unchanged in the folder: the file is removed;
//   - deleted on the server, changed in the folder: the memory is re-created
//     from the file (a read-only store keeps the file, unsynced);
//   - every file gone at once: the folder was wiped, not curated; it is
//     rebuilt from the server and nothing is deleted there.
//
// And across paths: a read-only store pulls but never pushes; a folder whose
// marker is missing or altered is never synced from (rebuilt when empty,
// otherwise left exactly as found); content the server refused, or that
// cannot be a memory (not UTF-8, too large), is not retried until it
// changes; an upload whose response was lost is settled by the next listing;
// on a case-insensitive filesystem, paths that differ only in case are
// skipped rather than merged.
//
// Nothing the agent wrote is destroyed. Each folder's sync state is
// journaled durably in a state folder beside it ([StateDir]) after every
// sync, so a worker killed at any moment leaves a folder the next one can
// adopt: the same session re-claimed syncs it against the journal and goes
// on; a folder of a session that has ended is flushed, then replaced. A
// folder without a matching journal, or that a live worker still serves, is
// refused as before, but for the folder of a mount killed before its first
// journal (nothing in it but the marker and temporary files), which is
// removed and mounted afresh. When the server wins a conflict, and before a folder
// is removed with content the server does not hold, the local content is
// copied to the state folder's kept/ and the log says where.
package memsync
