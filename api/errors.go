package api

import (
	"fmt"
	"net/http"
)

// ErrorType is the machine-readable kind of an API error. Clients branch on
// it; the message is for people.
type ErrorType string

// The error types of the wire contract, each with its HTTP status in Status.
const (
	InvalidRequest           ErrorType = "invalid_request_error"
	Authentication           ErrorType = "authentication_error"
	Permission               ErrorType = "permission_error"
	NotFound                 ErrorType = "not_found_error"
	Conflict                 ErrorType = "conflict_error"
	MemoryPreconditionFailed ErrorType = "memory_precondition_failed_error"
	MemoryPathConflict       ErrorType = "memory_path_conflict_error"
	RequestTooLarge          ErrorType = "request_too_large"
	RateLimit                ErrorType = "rate_limit_error"
	Internal                 ErrorType = "api_error"
	Overloaded               ErrorType = "overloaded_error"
	// ChangesPruned (410) answers a change-feed cursor older than the
	// versions the store's retention kept: start over from a snapshot.
	ChangesPruned ErrorType = "changes_pruned_error"
)

// Status is the HTTP status code that goes with an error type.
func (t ErrorType) Status() int {
	switch t {
	case InvalidRequest:
		return http.StatusBadRequest
	case Authentication:
		return http.StatusUnauthorized
	case Permission:
		return http.StatusForbidden
	case NotFound:
		return http.StatusNotFound
	case Conflict, MemoryPreconditionFailed, MemoryPathConflict:
		return http.StatusConflict
	case RequestTooLarge:
		return http.StatusRequestEntityTooLarge
	case RateLimit:
		return http.StatusTooManyRequests
	case Overloaded:
		return 529
	case ChangesPruned:
		return http.StatusGone
	default:
		return http.StatusInternalServerError
	}
}

// Error is the body of an error response, inside ErrorEnvelope. The optional
// fields are filled only by the error types that define them.
type Error struct {
	Type    ErrorType `json:"type"`
	Message string    `json:"message"`

	// ConflictingMemoryID and ConflictingPath name the memory that already
	// occupies a path (memory_path_conflict_error).
	ConflictingMemoryID string `json:"conflicting_memory_id,omitempty"`
	ConflictingPath     string `json:"conflicting_path,omitempty"`

	// Details carries structured context, e.g. the current lease state on a
	// stale heartbeat (412).
	Details map[string]any `json:"details,omitempty"`

	// StatusCode overrides Type's usual status where the contract pairs a
	// type with another status (a stale heartbeat is an
	// invalid_request_error answered 412). The client fills it, and
	// RequestID, from the response;
	// they are not part of the JSON body.
	StatusCode int    `json:"-"`
	RequestID  string `json:"-"`
}

func (e *Error) Error() string {
	if e.RequestID != "" {
		return fmt.Sprintf("%s (%d): %s [request-id %s]", e.Type, e.status(), e.Message, e.RequestID)
	}
	return fmt.Sprintf("%s (%d): %s", e.Type, e.status(), e.Message)
}

func (e *Error) status() int {
	if e.StatusCode != 0 {
		return e.StatusCode
	}
	return e.Type.Status()
}

// Errorf builds an Error of the given type with a formatted message.
func Errorf(t ErrorType, format string, args ...any) *Error {
	return &Error{Type: t, Message: fmt.Sprintf(format, args...)}
}

// ErrorEnvelope is the JSON body of every error response:
// {"type":"error","error":{…}}.
type ErrorEnvelope struct {
	Type  string `json:"type"`
	Error *Error `json:"error"`
}
