package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/memstore/memstore/api"
)

// maxErrorBody bounds how much of an error response is read: enough for any
// envelope, not a whole HTML page from a misconfigured proxy.
const maxErrorBody = 64 << 10

// decodeError turns a non-2xx response into an *api.Error and closes its
// body. A body that is not the error envelope (a proxy's HTML page, an empty
// 502) still yields an *api.Error, typed from the status, whose message
// quotes the start of the body, so callers branch on one error type only.
func (c *Client) decodeError(res *http.Response) error {
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	c.stats.received.Add(int64(len(body)))
	var env api.ErrorEnvelope
	ae := new(api.Error)
	if json.Unmarshal(body, &env) == nil && env.Error != nil && env.Error.Type != "" {
		ae = env.Error
	} else {
		ae.Type = typeForStatus(res.StatusCode)
		snippet := strings.TrimSpace(string(body))
		if len(snippet) > 200 {
			snippet = snippet[:200] + "…"
		}
		if snippet == "" {
			ae.Message = fmt.Sprintf("HTTP %s with no error body", res.Status)
		} else {
			ae.Message = fmt.Sprintf("HTTP %s: %s", res.Status, snippet)
		}
	}
	ae.StatusCode = res.StatusCode
	ae.RequestID = res.Header.Get("request-id")
	return ae
}

// typeForStatus names the error type a status stands for when the server did
// not say.
func typeForStatus(status int) api.ErrorType {
	switch status {
	case http.StatusBadRequest:
		return api.InvalidRequest
	case http.StatusUnauthorized:
		return api.Authentication
	case http.StatusForbidden:
		return api.Permission
	case http.StatusNotFound:
		return api.NotFound
	case http.StatusConflict:
		return api.Conflict
	case http.StatusRequestEntityTooLarge:
		return api.RequestTooLarge
	case http.StatusTooManyRequests:
		return api.RateLimit
	case 529:
		return api.Overloaded
	}
	if status >= 500 {
		return api.Internal
	}
	return api.InvalidRequest
}

// IsStatus reports whether err is (or wraps) an API error answered with the
// given HTTP status, e.g. IsStatus(err, 409) after an upload that lost a race.
func IsStatus(err error, status int) bool {
	var ae *api.Error
	return errors.As(err, &ae) && ae.StatusCode == status
}

// IsType reports whether err is (or wraps) an API error of type t. Several
// types share a status (409 is a path conflict, a failed precondition or a
// state conflict), and the type is what tells them apart.
func IsType(err error, t api.ErrorType) bool {
	var ae *api.Error
	return errors.As(err, &ae) && ae.Type == t
}
