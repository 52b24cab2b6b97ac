// Package worker is memstore's environment worker: it claims sessions from
// a self-hosted environment's work queue, runs their tool calls on this
// host, and keeps the memory stores they attach mounted and in sync. It
// speaks the Claude Managed Agents wire format, so it serves sessions of a
// memstore server or of Anthropic's API alike; it is what `memstore worker
// poll | run` runs, and what a program embeds instead of the official SDK's
// EnvironmentWorker.
//
// # One item's life
//
// [Worker.Run] polls with the environment key (Anthropic-Worker-ID set),
// acknowledges what it claims, and serves items one at a time;
// [Worker.RunItem] serves one item another process claimed; a
// [WebhookHandler] claims nothing until a signed session.status_run_started
// webhook wakes it, then drains the queue ([Worker.Drain]) and idles
// again. Either way:
//
//  1. The lease heartbeat starts first, in its own goroutine, and beats
//     every half TTL until the item is done — through the final memory
//     sync, so a slow flush never costs the lease.
//  2. Everything about the item uses the sessions token from its secret;
//     without one the worker falls back to the environment key, except
//     that a session with memory stores then fails ([ErrNoSessionsToken]):
//     the memory endpoints refuse the environment key, and a session never
//     runs without the memory it was promised.
//  3. The session is fetched once; its stores are mounted by memsync, each
//     at its mount_path with the /mnt/memory prefix replaced by
//     Config.MountRoot. The file tools accept both the advertised and the
//     real paths; write and edit refuse read-only stores.
//  4. The tool runner opens the session's event stream, then lists the
//     history, and runs every unanswered agent.tool_use of the toolset once,
//     in order — never twice, across reconnects and replays — posting each
//     result (retried while the lease lasts). After each call, a memory sync
//     runs if its interval has passed. A user.interrupt cancels the running
//     call and abandons the calls before it, with no result.
//  5. The runner ends when the session terminates or is deleted, or stays
//     idle after its turn for Config.MaxIdle: a clean end, which earns a
//     final memory sync. Every end then flushes local edits, removes the
//     folders, and force-stops the item.
//
// # Failures
//
// A failed item (the session cannot be fetched, a store cannot be mounted,
// no sessions token) is logged with its work_id and session_id and
// force-stopped; the poll loop goes on. Stopping the item while the
// session's tool call is outstanding is how the server learns that nobody
// is serving it: the session goes idle with stop_reason requires_action,
// and a user.interrupt or a new user.message queues it again.
//
// The lease can end three ways. A graceful stop (state stopping) or a
// forced one (stopped) shuts the session down: the running call is
// cancelled and its error result posted, the memory flushed. A lost lease
// (412, or no successful beat for a whole TTL) means another claim owns
// the item: the tools stop, no result is posted, and the item is left
// alone — neither stopped nor answered.
//
// Shutting down (the context passed to Run or RunItem ends, as on SIGTERM)
// is a graceful stop too: the running call is cancelled and its result
// posted, the memory flushed within its bound (no final sync: the session
// did not end), the item force-stopped. The session then waits idle with
// requires_action for the next worker. A program that cannot wait for that
// (a second Ctrl-C) calls [Worker.Abandon] before it exits, which logs what
// quitting loses: the item is left to its lease, and the edits not yet
// uploaded stay in folders that must be removed by hand.
//
// Poll errors are sorted once: 401, 403, 404 and other refusals that a
// retry cannot change end Run with an error saying what to check; network
// errors, 5xx, 408, 409 and 429 back off with jitter, from 2 s up to a
// minute.
package worker
