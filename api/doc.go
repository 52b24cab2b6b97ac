// Package api holds memstore's wire types: the JSON objects, request bodies
// and the error envelope of the HTTP API. The server encodes them and the
// client decodes them, so a field is spelled in exactly one place.
//
// Field names follow Anthropic's Claude Managed Agents API so that the
// official SDKs work against a memstore server unchanged.
package api
