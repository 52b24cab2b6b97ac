package server

import (
	"encoding/json"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// The control plane's rows as the API shows them. Storage keeps
// environments and work items as rows of its own; what only the wire has
// (type discriminators, a work item's data object, the empty collections
// the official SDK requires) is added here and nowhere else. Sessions are
// stored as the API's documents; they only gain what is computed when
// shown.

// wireEnvironment is an environment as the API shows it.
func wireEnvironment(e storage.Environment) api.Environment {
	out := api.Environment{
		ID: e.ID, Type: "environment", Name: e.Name, Description: e.Description,
		Config: api.EnvironmentConfig{Type: e.ConfigType}, Metadata: e.Metadata, Scope: e.Scope,
		CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt, ArchivedAt: e.ArchivedAt,
	}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	return out
}

// wireWork is a work item as the API shows it; only a poll's claim adds
// its secret.
func wireWork(w storage.Work) api.Work {
	out := api.Work{
		Type: "work", ID: w.ID, EnvironmentID: w.EnvironmentID,
		Data: api.WorkData{Type: "session", ID: w.SessionID}, State: w.State, Metadata: w.Metadata,
		CreatedAt: w.CreatedAt, AcknowledgedAt: w.AcknowledgedAt, StartedAt: w.StartedAt,
		LatestHeartbeatAt: w.LatestHeartbeatAt, StopRequestedAt: w.StopRequestedAt, StoppedAt: w.StoppedAt,
	}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	return out
}

// leaseState is a stored lease as a stale heartbeat's 412 shows it.
func leaseState(w storage.Work) api.WorkLeaseState {
	st := api.WorkLeaseState{State: w.State, TTLSeconds: w.LeaseTTLSeconds}
	if w.LatestHeartbeatAt != nil {
		t := storage.HeartbeatToken(*w.LatestHeartbeatAt)
		st.LastHeartbeat = &t
	}
	return st
}

// wireQueueStats is a queue's counts with the workers seen polling it.
func wireQueueStats(st storage.QueueStats, workersPolling int64) api.WorkQueueStats {
	return api.WorkQueueStats{Type: "work_queue_stats", Depth: st.Depth, Pending: st.Pending,
		OldestQueuedAt: st.OldestQueuedAt, WorkersPolling: workersPolling}
}

// wireSession fills what a session shows beyond what is stored: its
// timing statistics and the always-present empty collections.
func (s *Server) wireSession(sess api.Session) api.Session {
	sess.Type = "session"
	end := s.now()
	if storage.Ended(sess) {
		end = sess.UpdatedAt
	}
	sess.Stats.DurationSeconds = max(0, end.Sub(sess.CreatedAt).Seconds())
	if sess.Resources == nil {
		sess.Resources = []api.SessionResource{}
	}
	if sess.OutcomeEvaluations == nil {
		sess.OutcomeEvaluations = []json.RawMessage{}
	}
	if sess.VaultIDs == nil {
		sess.VaultIDs = []string{}
	}
	if sess.Metadata == nil {
		sess.Metadata = map[string]string{}
	}
	return sess
}
