package server

import (
	"net/http"

	"github.com/memstore/memstore/api"
)

// recoveryRoutes is memstore's own recovery endpoint (api.ExtensionRecoveries):
// the environment key's one memory write, for the files a killed worker
// left of a session no worker holds (app.Memories.Recover has the rules).
func (s *Server) recoveryRoutes() {
	s.mux.HandleFunc("POST /v1/environments/{env}/recoveries", s.authed(s.recoverMemory))
}

func (s *Server) recoverMemory(w http.ResponseWriter, r *http.Request, p Principal) error {
	env, err := environmentID(r)
	if err != nil {
		return err
	}
	if err := requireEnvironmentScope(p, env); err != nil {
		return err
	}
	if _, err := s.environment(r.Context(), env); err != nil {
		return err
	}
	var req api.RecoveryRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	got, err := s.app.Memories.Recover(r.Context(), env, req)
	if err != nil {
		return storeError(err, req.MemoryStoreID)
	}
	writeJSON(w, http.StatusOK, api.Recovery{Type: "memory_recovery", Outcome: got.Outcome, Memory: wireMemory(got.Memory, api.ViewBasic)})
	return nil
}
