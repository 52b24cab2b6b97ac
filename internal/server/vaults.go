package server

import (
	"net/http"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
)

// vaultRoutes serve the official SDK's Beta.Vaults and
// Beta.Vaults.Credentials. A credential's token goes in and never comes
// out.
func (s *Server) vaultRoutes() {
	s.mux.HandleFunc("POST /v1/vaults", s.authed(s.createVault))
	s.mux.HandleFunc("GET /v1/vaults", s.authed(s.listVaults))
	s.mux.HandleFunc("GET /v1/vaults/{vault}", s.authed(s.getVault))
	s.mux.HandleFunc("POST /v1/vaults/{vault}", s.authed(s.updateVault))
	s.mux.HandleFunc("POST /v1/vaults/{vault}/archive", s.authed(s.archiveVault))
	s.mux.HandleFunc("DELETE /v1/vaults/{vault}", s.authed(s.deleteVault))
	s.mux.HandleFunc("POST /v1/vaults/{vault}/credentials", s.authed(s.createVaultCredential))
	s.mux.HandleFunc("GET /v1/vaults/{vault}/credentials", s.authed(s.listVaultCredentials))
	s.mux.HandleFunc("GET /v1/vaults/{vault}/credentials/{credential}", s.authed(s.getVaultCredential))
	s.mux.HandleFunc("POST /v1/vaults/{vault}/credentials/{credential}", s.authed(s.updateVaultCredential))
	s.mux.HandleFunc("POST /v1/vaults/{vault}/credentials/{credential}/archive", s.authed(s.archiveVaultCredential))
	s.mux.HandleFunc("DELETE /v1/vaults/{vault}/credentials/{credential}", s.authed(s.deleteVaultCredential))
}

// vaultIDs reads the vault (and credential, when the route has one) of
// the path; every vault route needs an API key.
func vaultIDs(r *http.Request, p Principal, credential bool) (vault, cred string, err error) {
	if err := requireAPIKey(p); err != nil {
		return "", "", err
	}
	vault = r.PathValue("vault")
	if err := checkID(ids.Vault, "vault", vault); err != nil {
		return "", "", err
	}
	if credential {
		cred = r.PathValue("credential")
		if err := checkID(ids.VaultCredential, "credential", cred); err != nil {
			return "", "", err
		}
	}
	return vault, cred, nil
}

func (s *Server) createVault(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	var req api.CreateVaultRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	v, err := s.app.Vaults.Create(r.Context(), req, p.Caller())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) listVaults(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	q := r.URL.Query()
	l, err := listParams(q, "vaults", api.MaxListLimit, false)
	if err != nil {
		return err
	}
	archived, err := boolParam(q, "include_archived")
	if err != nil {
		return err
	}
	list, err := s.store.ListVaults(r.Context(), l.query(archived))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cutPage(l, list, func(v api.Vault) string { return v.ID }, func(v api.Vault) api.Vault { return v }))
	return nil
}

func (s *Server) getVault(w http.ResponseWriter, r *http.Request, p Principal) error {
	id, _, err := vaultIDs(r, p, false)
	if err != nil {
		return err
	}
	v, err := s.app.Vaults.Get(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) updateVault(w http.ResponseWriter, r *http.Request, p Principal) error {
	id, _, err := vaultIDs(r, p, false)
	if err != nil {
		return err
	}
	var req api.UpdateVaultRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	v, err := s.app.Vaults.Update(r.Context(), id, req, p.Caller())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) archiveVault(w http.ResponseWriter, r *http.Request, p Principal) error {
	id, _, err := vaultIDs(r, p, false)
	if err != nil {
		return err
	}
	v, err := s.app.Vaults.Archive(r.Context(), id, p.Caller())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) deleteVault(w http.ResponseWriter, r *http.Request, p Principal) error {
	id, _, err := vaultIDs(r, p, false)
	if err != nil {
		return err
	}
	if err := s.app.Vaults.Delete(r.Context(), id, p.Caller()); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.Deleted{ID: id, Type: "vault_deleted"})
	return nil
}

func (s *Server) createVaultCredential(w http.ResponseWriter, r *http.Request, p Principal) error {
	vault, _, err := vaultIDs(r, p, false)
	if err != nil {
		return err
	}
	var req api.CreateVaultCredentialRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	c, err := s.app.Vaults.CreateCredential(r.Context(), vault, req, p.Caller())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) listVaultCredentials(w http.ResponseWriter, r *http.Request, p Principal) error {
	vault, _, err := vaultIDs(r, p, false)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	l, err := listParams(q, "vault_credentials", api.MaxListLimit, false)
	if err != nil {
		return err
	}
	archived, err := boolParam(q, "include_archived")
	if err != nil {
		return err
	}
	list, err := s.store.ListVaultCredentials(r.Context(), vault, l.query(archived))
	if err != nil {
		return orMissing(err, "vault", vault, "GET /v1/vaults")
	}
	writeJSON(w, http.StatusOK, cutPage(l, list, func(c api.VaultCredential) string { return c.ID }, func(c api.VaultCredential) api.VaultCredential { return c }))
	return nil
}

func (s *Server) getVaultCredential(w http.ResponseWriter, r *http.Request, p Principal) error {
	vault, id, err := vaultIDs(r, p, true)
	if err != nil {
		return err
	}
	c, err := s.app.Vaults.GetCredential(r.Context(), vault, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) updateVaultCredential(w http.ResponseWriter, r *http.Request, p Principal) error {
	vault, id, err := vaultIDs(r, p, true)
	if err != nil {
		return err
	}
	var req api.UpdateVaultCredentialRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	c, err := s.app.Vaults.UpdateCredential(r.Context(), vault, id, req, p.Caller())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) archiveVaultCredential(w http.ResponseWriter, r *http.Request, p Principal) error {
	vault, id, err := vaultIDs(r, p, true)
	if err != nil {
		return err
	}
	c, err := s.app.Vaults.ArchiveCredential(r.Context(), vault, id, p.Caller())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) deleteVaultCredential(w http.ResponseWriter, r *http.Request, p Principal) error {
	vault, id, err := vaultIDs(r, p, true)
	if err != nil {
		return err
	}
	if err := s.app.Vaults.DeleteCredential(r.Context(), vault, id, p.Caller()); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.Deleted{ID: id, Type: "vault_credential_deleted"})
	return nil
}
