package server

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
)

// skillRoutes serve the official SDK's Beta.Skills and Beta.Skills.Versions.
func (s *Server) skillRoutes() {
	s.mux.HandleFunc("POST /v1/skills", s.authed(s.createSkill))
	s.mux.HandleFunc("GET /v1/skills", s.authed(s.listSkills))
	s.mux.HandleFunc("GET /v1/skills/{skill}", s.authed(s.getSkill))
	s.mux.HandleFunc("DELETE /v1/skills/{skill}", s.authed(s.deleteSkill))
	s.mux.HandleFunc("POST /v1/skills/{skill}/versions", s.authed(s.createSkillVersion))
	s.mux.HandleFunc("GET /v1/skills/{skill}/versions", s.authed(s.listSkillVersions))
	s.mux.HandleFunc("GET /v1/skills/{skill}/versions/{version}", s.authed(s.getSkillVersion))
	s.mux.HandleFunc("DELETE /v1/skills/{skill}/versions/{version}", s.authed(s.deleteSkillVersion))
	s.mux.HandleFunc("GET /v1/skills/{skill}/versions/{version}/content", s.authed(s.downloadSkillVersion))
}

const (
	listSkills = "GET /v1/skills"
	// maxSkillListLimit is the SDK's documented top of limit.
	maxSkillListLimit = 1000
	// skillUploadOverhead is room, above the files' own bytes, for the
	// multipart framing of up to app.MaxSkillFiles parts.
	skillUploadOverhead = 1 << 20
)

// skillUploadCap is the body cap of the skill uploads, which carry files
// rather than JSON (see withBodyCap).
func skillUploadCap(r *http.Request) (int64, bool) {
	if r.Method == http.MethodPost && (r.URL.Path == "/v1/skills" || strings.HasPrefix(r.URL.Path, "/v1/skills/") && strings.HasSuffix(r.URL.Path, "/versions")) {
		return app.MaxSkillUploadBytes + skillUploadOverhead, true
	}
	return 0, false
}

func skillID(r *http.Request) (string, error) {
	id := r.PathValue("skill")
	return id, checkID(ids.Skill, "skill", id)
}

func skillWire(sk storage.SkillRow) api.Skill {
	return api.Skill{ID: sk.ID, Type: "skill", DisplayName: sk.DisplayName, LatestVersionID: sk.LatestVersionID,
		Source: api.SkillSource{Type: "custom"}, CreatedAt: sk.CreatedAt, UpdatedAt: sk.UpdatedAt}
}

func skillVersionWire(v storage.SkillVersionRow) api.SkillVersion {
	return api.SkillVersion{ID: v.ID, Type: "skill_version", SkillID: v.SkillID, Name: v.Name, Description: v.Description, CreatedAt: v.CreatedAt}
}

// readSkillUpload reads the multipart form the SDK sends: one part named
// files (or files[]) per file, its path in the filename, and an optional
// display_name. The filename is read raw from the header: Go's
// FileName drops the folders, which are part of what is validated.
func readSkillUpload(r *http.Request) (files []app.UploadedFile, displayName string, err error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, "", apiErrorf(invalidRequest, "the body must be multipart/form-data with one part named files per file: %v", err)
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return files, displayName, nil
		}
		if err != nil {
			return nil, "", uploadError(err)
		}
		content, err := io.ReadAll(part)
		if err != nil {
			return nil, "", uploadError(err)
		}
		_, params, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		switch name := part.FormName(); name {
		case "files", "files[]":
			if len(files) == app.MaxSkillFiles {
				return nil, "", apiErrorf(invalidRequest, "files: more than %d files uploaded; a skill holds at most %d", app.MaxSkillFiles, app.MaxSkillFiles)
			}
			files = append(files, app.UploadedFile{Name: params["filename"], Content: content})
		case "display_name":
			displayName = string(content)
		default:
			return nil, "", apiErrorf(invalidRequest, "unknown form field %q; send files (one part per file) and optionally display_name", name)
		}
	}
}

// uploadError is the answer to a body that could not be read whole: over
// the cap (413) or malformed (400).
func uploadError(err error) error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return apiErrorf(api.RequestTooLarge, "the upload exceeds %d bytes; a skill's files together may hold at most %d bytes", tooLarge.Limit, app.MaxSkillUploadBytes)
	}
	return bodyError(err)
}

func (s *Server) createSkill(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	files, displayName, err := readSkillUpload(r)
	if err != nil {
		return err
	}
	sk, err := s.app.Skills.Create(r.Context(), displayName, files, p.Caller())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, skillWire(sk))
	return nil
}

func (s *Server) listSkills(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	q := r.URL.Query()
	l, err := listParams(q, "skills", maxSkillListLimit, false)
	if err != nil {
		return err
	}
	// Only custom skills live here: a filter on another source finds none.
	if src := q.Get("source"); src != "" && src != "custom" {
		writeJSON(w, http.StatusOK, api.Page[api.Skill]{Data: []api.Skill{}})
		return nil
	}
	rows, err := s.store.ListSkills(r.Context(), l.query(false))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cutPage(l, rows, func(sk storage.SkillRow) string { return sk.ID }, skillWire))
	return nil
}

func (s *Server) getSkill(w http.ResponseWriter, r *http.Request, p Principal) error {
	id, err := skillID(r)
	if err != nil {
		return err
	}
	if err := s.skillReadAccess(r.Context(), p, id); err != nil {
		return err
	}
	sk, err := s.store.GetSkill(r.Context(), id)
	if err != nil {
		return orMissing(err, "skill", id, listSkills)
	}
	writeJSON(w, http.StatusOK, skillWire(sk))
	return nil
}

func (s *Server) deleteSkill(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	id, err := skillID(r)
	if err != nil {
		return err
	}
	if err := s.app.Skills.Delete(r.Context(), id, p.Caller()); err != nil {
		return orMissing(err, "skill", id, listSkills)
	}
	writeJSON(w, http.StatusOK, api.DeletedSkill{ID: id, Type: "skill_deleted"})
	return nil
}

func (s *Server) createSkillVersion(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	id, err := skillID(r)
	if err != nil {
		return err
	}
	files, displayName, err := readSkillUpload(r)
	if err != nil {
		return err
	}
	if displayName != "" {
		return apiErrorf(invalidRequest, "display_name belongs to the skill, not to a version; send only files")
	}
	v, err := s.app.Skills.CreateVersion(r.Context(), id, files, p.Caller())
	if err != nil {
		return orMissing(err, "skill", id, listSkills)
	}
	writeJSON(w, http.StatusOK, skillVersionWire(v))
	return nil
}

func (s *Server) listSkillVersions(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	id, err := skillID(r)
	if err != nil {
		return err
	}
	l, err := listParams(r.URL.Query(), "skill_versions:"+id, maxSkillListLimit, false)
	if err != nil {
		return err
	}
	rows, err := s.store.ListSkillVersions(r.Context(), id, l.query(false))
	if err != nil {
		return orMissing(err, "skill", id, listSkills)
	}
	writeJSON(w, http.StatusOK, cutPage(l, rows, func(v storage.SkillVersionRow) string { return v.ID }, skillVersionWire))
	return nil
}

// skillVersion resolves the URL's skill and version ("latest" is the
// newest).
func (s *Server) skillVersion(r *http.Request) (storage.SkillVersionRow, error) {
	id, err := skillID(r)
	if err != nil {
		return storage.SkillVersionRow{}, err
	}
	version := r.PathValue("version")
	v, err := s.app.Skills.ResolveVersion(r.Context(), id, version)
	if errors.Is(err, storage.ErrNotFound) {
		return v, apiErrorf(notFound, "no version %s of skill %s: it does not exist or was deleted; GET /v1/skills/%s/versions lists them", version, id, id)
	}
	return v, err
}

func (s *Server) getSkillVersion(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := s.skillReadAccess(r.Context(), p, r.PathValue("skill")); err != nil {
		return err
	}
	v, err := s.skillVersion(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, skillVersionWire(v))
	return nil
}

func (s *Server) deleteSkillVersion(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	v, err := s.skillVersion(r)
	if err != nil {
		return err
	}
	if err := s.app.Skills.DeleteVersion(r.Context(), v.SkillID, v.ID, p.Caller()); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.DeletedSkillVersion{ID: v.ID, Type: "skill_version_deleted"})
	return nil
}

// downloadSkillVersion answers a zip whose one top-level folder is the
// skill's name, the layout the official worker extracts.
func (s *Server) downloadSkillVersion(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := s.skillReadAccess(r.Context(), p, r.PathValue("skill")); err != nil {
		return err
	}
	v, err := s.skillVersion(r)
	if err != nil {
		return err
	}
	files, err := s.store.SkillVersionFiles(r.Context(), v.SkillID, v.ID)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		fw, err := zw.CreateHeader(&zip.FileHeader{Name: v.Name + "/" + f.Path, Method: zip.Deflate, Modified: v.CreatedAt})
		if err != nil {
			return err
		}
		if _, err := fw.Write(f.Content); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/zip")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.zip"`, v.Name))
	w.Header().Set("Content-Length", fmt.Sprint(buf.Len()))
	w.WriteHeader(http.StatusOK)
	w.Write(buf.Bytes())
	return nil
}
