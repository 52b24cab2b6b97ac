package app

import "github.com/memstore/memstore/internal/validate"

// patchMetadata merges a patch into stored metadata: a key mapped to null
// or "" is deleted, any other value set. The result is checked whole.
func patchMetadata(field string, stored map[string]string, patch map[string]*string) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range stored {
		out[k] = v
	}
	for k, v := range patch {
		if v == nil || *v == "" {
			delete(out, k)
		} else {
			out[k] = *v
		}
	}
	if err := validate.Metadata(field, out); err != nil {
		return nil, err
	}
	return out, nil
}
