package app

import (
	"context"

	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/validate"
)

// MemoryStores creates, changes, archives and deletes memory stores.
type MemoryStores struct{ app *App }

// Create checks a new store's name, description and metadata, and makes it.
func (s *MemoryStores) Create(ctx context.Context, in storage.NewMemoryStore, by Caller) (storage.MemoryStoreRow, error) {
	if in.Metadata == nil {
		in.Metadata = map[string]string{}
	}
	if err := firstError(
		validate.Name("name", in.Name),
		validate.Description("description", in.Description),
		validate.Metadata("metadata", in.Metadata),
		checkRetention(in.Retention),
	); err != nil {
		return storage.MemoryStoreRow{}, err
	}
	st, err := s.app.store.CreateMemoryStore(ctx, in)
	if err != nil {
		return st, err
	}
	s.app.log.InfoContext(ctx, "memory store created", "memory_store_id", st.ID, by.attr())
	return st, nil
}

// Update checks and applies a patch. Each metadata pair is checked here;
// their count, against the merged metadata, in storage.
func (s *MemoryStores) Update(ctx context.Context, id string, patch storage.MemoryStorePatch, by Caller) (storage.MemoryStoreRow, error) {
	var errs []error
	if patch.Name != nil {
		errs = append(errs, validate.Name("name", *patch.Name))
	}
	if patch.Description != nil {
		errs = append(errs, validate.Description("description", *patch.Description))
	}
	for k, v := range patch.Metadata {
		if v != nil {
			errs = append(errs, validate.MetadataPair("metadata", k, *v))
		}
	}
	if patch.Retention != nil && !patch.Retention.Inherit {
		errs = append(errs, checkRetention(&patch.Retention.Policy))
	}
	if err := firstError(errs...); err != nil {
		return storage.MemoryStoreRow{}, err
	}
	st, err := s.app.store.UpdateMemoryStore(ctx, id, patch)
	if err != nil {
		return st, err
	}
	if patch.Retention != nil {
		p, inherited := s.app.RetentionOf(st)
		s.app.log.InfoContext(ctx, "memory store updated", "memory_store_id", id, "retention", p.String(), "retention_inherited", inherited, by.attr())
		return st, nil
	}
	s.app.log.InfoContext(ctx, "memory store updated", "memory_store_id", id, by.attr())
	return st, nil
}

// Archive makes a store read-only for good.
func (s *MemoryStores) Archive(ctx context.Context, id string, by Caller) (storage.MemoryStoreRow, error) {
	st, err := s.app.store.ArchiveMemoryStore(ctx, id)
	if err != nil {
		return st, err
	}
	s.app.log.InfoContext(ctx, "memory store archived", "memory_store_id", id, by.attr())
	return st, nil
}

// Delete removes a store with every memory and version; storage refuses
// while a live session may still mount it (storage.StoreInUseError).
func (s *MemoryStores) Delete(ctx context.Context, id string, by Caller) error {
	if err := s.app.store.DeleteMemoryStore(ctx, id); err != nil {
		return err
	}
	s.app.log.InfoContext(ctx, "memory store deleted", "memory_store_id", id, by.attr())
	return nil
}
