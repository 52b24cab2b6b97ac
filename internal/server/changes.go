package server

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/validate"
)

// The change feed and the snapshot (SPEC §8) let a worker sync at the cost
// of what changed: one feed request when nothing did, one streamed request
// to mount a store. Both are memstore's own; extensionsHeader tells a
// client they are here.

// extensions is the value of api.ExtensionsHeader.
const extensions = api.ExtensionChanges + ", " + api.ExtensionSnapshot + ", " + api.ExtensionSearch + ", " + api.ExtensionRecoveries + ", " + api.ExtensionRetention

// changesRecheck bounds how long a long poll can miss a change committed
// by something that does not wake it (another server sharing the
// database): it re-reads the feed at least this often.
const changesRecheck = time.Second

// advertise sets the extensions header on a store or listing response.
func advertise(w http.ResponseWriter) {
	w.Header().Set(api.ExtensionsHeader, extensions)
}

// listChanges answers GET /v1/memory_stores/{id}/changes?after=SEQ: the
// versions after the cursor, oldest first. With wait_ms and nothing to
// return it waits for the store's next change, up to wait_ms.
func (s *Server) listChanges(w http.ResponseWriter, r *http.Request, p Principal) error {
	req, err := s.memoryPreamble(r, p, storeParams, reading)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var after int64
	if v := q.Get("after"); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil || after < 0 {
			return apiErrorf(invalidRequest, "after: %q is not a sequence; send 0 (or leave it out) for every change, or the latest_sequence of your previous answer", v)
		}
	}
	wait, err := rangeParam(q, "wait_ms", 0, api.MaxChangesWait.Milliseconds(), 0, "milliseconds a long poll waits for a change; ask again when it returns")
	if err != nil {
		return err
	}
	limit := api.MaxChangesLimit
	if q.Has("limit") {
		if limit, err = listLimitParam(q, api.MaxChangesLimit, true); err != nil {
			return err
		}
	}
	ctx := r.Context()
	deadline := time.Now().Add(time.Duration(wait) * time.Millisecond)
	for {
		wake := s.app.Memories.WaitForChange(req.storeID)
		page, err := s.app.Memories.ListChanges(ctx, req.storeID, after, limit)
		var ahead *storage.SequenceAheadError
		if errors.As(err, &ahead) {
			return apiErrorf(invalidRequest, "after: sequence %d is ahead of memory store %s's latest sequence %d, so this store did not issue it (a cursor from another store, or from a store that was deleted and recreated); start over from a full listing or a snapshot and follow the feed from the sequence it returns", ahead.After, req.storeID, ahead.Latest)
		}
		var pruned *storage.ChangesPrunedError
		if errors.As(err, &pruned) {
			return apiErrorf(api.ChangesPruned, "after: the changes after sequence %d of memory store %s are no longer kept: its version retention deleted versions up to sequence %d. Start over from a snapshot (GET /v1/memory_stores/%s/snapshot, or a full listing) and follow the feed from the sequence it returns (its %s header)", pruned.After, req.storeID, pruned.PrunedThrough, req.storeID, api.SequenceHeader)
		}
		if err != nil {
			return storeError(err, req.storeID)
		}
		remaining := time.Until(deadline)
		if len(page.Changes) > 0 || remaining <= 0 {
			writeJSON(w, http.StatusOK, wireChangeList(page))
			return nil
		}
		t := time.NewTimer(min(remaining, changesRecheck))
		select {
		case <-wake:
		case <-t.C:
		case <-s.closing:
			// Shutting down: answer what there is, the client asks again.
			t.Stop()
			writeJSON(w, http.StatusOK, wireChangeList(page))
			return nil
		case <-ctx.Done():
		}
		t.Stop()
		if ctx.Err() != nil {
			return nil
		}
	}
}

// snapshot answers GET /v1/memory_stores/{id}/snapshot[?path_prefix=/p/]:
// every memory under the prefix with its content, from one consistent
// read, streamed in the api.SnapshotEntry framing so a client writes each
// file to disk as it arrives. The sequence the snapshot is at goes in
// api.SequenceHeader, before the first byte of the body. The read stages
// the framing on disk and a sender streams it as it grows
// (snapshot_spool.go): the client starts on the first memories at once,
// and the read ends without waiting for the client.
func (s *Server) snapshot(w http.ResponseWriter, r *http.Request, p Principal) error {
	req, err := s.memoryPreamble(r, p, storeParams, reading)
	if err != nil {
		return err
	}
	prefix := "/"
	if q := r.URL.Query(); q.Has("path_prefix") {
		prefix = q.Get("path_prefix")
		if err := validate.PathPrefix("path_prefix", prefix); err != nil {
			return err
		}
	}
	spool, err := newSnapshotSpool(s.cfg.SpoolDir)
	if err != nil {
		return err
	}
	defer spool.Close()
	var (
		seq     int64
		started bool
		sent    chan error // the sender's result, once it runs
	)
	send := func() {
		w.Header().Set("Content-Type", api.SnapshotContentType)
		w.Header().Set(api.SequenceHeader, strconv.FormatInt(seq, 10))
		advertise(w)
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		sent = make(chan error, 1)
		go func() { sent <- spool.sendTo(w, rc.Flush) }()
	}
	// However the handler ends, a panic included, the sender is done with
	// w and the spool before they go.
	defer func() {
		if sent != nil {
			spool.end(seq, errSnapshotAbandoned)
			<-sent
		}
	}()
	err = s.store.Snapshot(r.Context(), req.storeID, prefix, func(at int64) error {
		if spool.count > 0 {
			// A backend that retries its read (a serialization failure)
			// would send a second copy after the first's memories.
			return errors.New("the snapshot's read was retried after its first memories were sent")
		}
		seq, started = at, true
		return nil
	}, func(m storage.MemoryRow) error {
		first, err := spool.add(m)
		if first && err == nil {
			send()
		}
		return err
	})
	if sent == nil {
		// Nothing was sent: a failed read is answered with its error.
		if !started {
			return storeError(err, req.storeID)
		}
		if err != nil {
			return err
		}
		if err := spool.end(seq, nil); err != nil {
			return err
		}
		send()
	} else if eerr := spool.end(seq, err); err == nil {
		err = eerr
	}
	serr := <-sent
	sent = nil
	if serr != nil || err != nil {
		// The status is out; the missing end line tells the client the
		// stream is incomplete.
		if serr != nil {
			err = serr // the read stopped because the client went away
		}
		s.log.WarnContext(r.Context(), "snapshot cut short", "memory_store_id", req.storeID, "error", err)
	}
	return nil
}
