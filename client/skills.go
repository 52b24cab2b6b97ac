package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"iter"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"

	"github.com/memstore/memstore/api"
)

// SkillFile is one file of a skill upload: Path is its path with the
// skill's folder first ("pdf-tools/SKILL.md"), as the server validates it.
type SkillFile struct {
	Path    string
	Content []byte
}

// CreateSkill uploads files as a new skill's first version. displayName
// may be empty (the SKILL.md name is used).
func (c *Client) CreateSkill(ctx context.Context, displayName string, files []SkillFile) (*api.Skill, error) {
	body, ctype, err := skillUpload(displayName, files)
	if err != nil {
		return nil, err
	}
	out := new(api.Skill)
	return out, c.do(ctx, request{method: http.MethodPost, path: "/v1/skills", raw: body, rawType: ctype}, out)
}

// CreateSkillVersion uploads files as a new version of skill skillID.
func (c *Client) CreateSkillVersion(ctx context.Context, skillID string, files []SkillFile) (*api.SkillVersion, error) {
	path, err := route("/v1/skills/{skill_id}/versions", skillID)
	if err != nil {
		return nil, err
	}
	body, ctype, err := skillUpload("", files)
	if err != nil {
		return nil, err
	}
	out := new(api.SkillVersion)
	return out, c.do(ctx, request{method: http.MethodPost, path: path, raw: body, rawType: ctype}, out)
}

// quoteEscaper escapes a filename inside the quotes of a
// Content-Disposition header (as mime/multipart does for its own fields).
var quoteEscaper = strings.NewReplacer("\\", "\\\\", `"`, "\\\"")

// skillUpload is the multipart form the Skills API reads: one part named
// files per file, its path as the filename.
func skillUpload(displayName string, files []SkillFile) ([]byte, string, error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if displayName != "" {
		if err := mw.WriteField("display_name", displayName); err != nil {
			return nil, "", err
		}
	}
	for _, f := range files {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="files"; filename="%s"`, quoteEscaper.Replace(f.Path)))
		h.Set("Content-Type", "application/octet-stream")
		w, err := mw.CreatePart(h)
		if err != nil {
			return nil, "", err
		}
		if _, err := w.Write(f.Content); err != nil {
			return nil, "", err
		}
	}
	if err := mw.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), mw.FormDataContentType(), nil
}

// GetSkill fetches a skill.
func (c *Client) GetSkill(ctx context.Context, skillID string) (*api.Skill, error) {
	path, err := route("/v1/skills/{skill_id}", skillID)
	if err != nil {
		return nil, err
	}
	out := new(api.Skill)
	return out, c.do(ctx, request{method: http.MethodGet, path: path}, out)
}

// ListSkills returns one page of skills, newest first (limit 0: the
// server's default).
func (c *Client) ListSkills(ctx context.Context, limit int, page string) (*api.Page[api.Skill], error) {
	out := new(api.Page[api.Skill])
	return out, c.do(ctx, request{method: http.MethodGet, path: "/v1/skills", query: pageQuery(limit, page)}, out)
}

// ListAllSkills yields every skill, page after page; it stops at the
// first error, which it yields.
func (c *Client) ListAllSkills(ctx context.Context) iter.Seq2[api.Skill, error] {
	return all("", func(page string) (*api.Page[api.Skill], error) { return c.ListSkills(ctx, 100, page) })
}

// ListSkillVersions returns one page of a skill's versions, newest first.
func (c *Client) ListSkillVersions(ctx context.Context, skillID string, limit int, page string) (*api.Page[api.SkillVersion], error) {
	path, err := route("/v1/skills/{skill_id}/versions", skillID)
	if err != nil {
		return nil, err
	}
	out := new(api.Page[api.SkillVersion])
	return out, c.do(ctx, request{method: http.MethodGet, path: path, query: pageQuery(limit, page)}, out)
}

// ListAllSkillVersions yields every version of a skill, newest first.
func (c *Client) ListAllSkillVersions(ctx context.Context, skillID string) iter.Seq2[api.SkillVersion, error] {
	return all("", func(page string) (*api.Page[api.SkillVersion], error) {
		return c.ListSkillVersions(ctx, skillID, 100, page)
	})
}

// GetSkillVersion fetches one version of a skill; version "latest" is
// its newest, and the answer names the concrete version.
func (c *Client) GetSkillVersion(ctx context.Context, skillID, version string) (*api.SkillVersion, error) {
	path, err := route("/v1/skills/{skill_id}/versions/{version}", skillID, version)
	if err != nil {
		return nil, err
	}
	out := new(api.SkillVersion)
	return out, c.do(ctx, request{method: http.MethodGet, path: path}, out)
}

// DownloadSkillVersion opens the archive of a version's files (a zip from
// memstore; Anthropic's API may answer a tar). The caller closes it and
// must not trust its member names: see package worker's extraction.
func (c *Client) DownloadSkillVersion(ctx context.Context, skillID, version string) (io.ReadCloser, error) {
	path, err := route("/v1/skills/{skill_id}/versions/{version}/content", skillID, version)
	if err != nil {
		return nil, err
	}
	res, _, err := c.send(ctx, request{method: http.MethodGet, path: path, header: http.Header{"Accept": {"application/binary"}}}, false)
	if err != nil {
		return nil, err
	}
	return res.Body, nil
}

func pageQuery(limit int, page string) url.Values {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if page != "" {
		q.Set("page", page)
	}
	return q
}
