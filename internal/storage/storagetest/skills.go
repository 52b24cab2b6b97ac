package storagetest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
)

func testSkills(t *testing.T, open Factory) {
	ctx := context.Background()
	clock := newClock()
	s := open(t, clock.Now)
	t.Cleanup(func() { s.Close() })

	ada := storage.Actor{Kind: storage.ActorUser, ID: "user_ada"}
	binary := []byte{0, 1, 2, 0xff, 0xfe}
	first := storage.SkillVersionRow{ID: ids.New(ids.SkillVersion), Name: "pdf", Description: "Reads PDFs", CreatedBy: ada,
		Files: []storage.SkillFile{{Path: "SKILL.md", Content: []byte("---\nname: pdf\n---\nv1")}, {Path: "bin/tool", Content: binary}}}
	sk, err := s.CreateSkill(ctx, storage.SkillRow{ID: ids.New(ids.Skill), Name: "pdf", DisplayName: "PDF", CreatedBy: ada}, first)
	if err != nil {
		t.Fatal(err)
	}
	if sk.LatestVersionID != first.ID || !sk.CreatedAt.Equal(clock.Now()) {
		t.Fatalf("CreateSkill = %+v; want latest %s, created now", sk, first.ID)
	}

	clock.Advance(1e9)
	bob := storage.Actor{Kind: storage.ActorAPIKey, ID: "apikey_bob"}
	second, err := s.CreateSkillVersion(ctx, storage.SkillVersionRow{ID: ids.New(ids.SkillVersion), SkillID: sk.ID, Name: "pdf", Description: "Reads PDFs better", CreatedBy: bob,
		Files: []storage.SkillFile{{Path: "SKILL.md", Content: []byte("v2")}}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSkill(ctx, sk.ID)
	if err != nil || got.LatestVersionID != second.ID || !got.UpdatedAt.Equal(clock.Now()) || !got.CreatedAt.Equal(sk.CreatedAt) || got.CreatedBy != ada {
		t.Fatalf("GetSkill after a second version = %+v, %v; want latest %s updated now, created by %v", got, err, second.ID, ada)
	}
	versions, err := s.ListSkillVersions(ctx, sk.ID, storage.ListQuery{Limit: 10})
	if err != nil || len(versions) != 2 || versions[0].ID != second.ID || versions[1].ID != first.ID || versions[0].CreatedBy != bob || versions[1].Description != "Reads PDFs" {
		t.Fatalf("ListSkillVersions = %+v, %v; want the second then the first, with who uploaded each", versions, err)
	}
	page, err := s.ListSkillVersions(ctx, sk.ID, storage.ListQuery{Limit: 10, After: second.ID})
	if err != nil || len(page) != 1 || page[0].ID != first.ID {
		t.Fatalf("ListSkillVersions after %s = %+v, %v; want the first only", second.ID, page, err)
	}
	files, err := s.SkillVersionFiles(ctx, sk.ID, first.ID)
	if err != nil || len(files) != 2 || files[0].Path != "SKILL.md" || files[1].Path != "bin/tool" || !bytes.Equal(files[1].Content, binary) {
		t.Fatalf("SkillVersionFiles(first) = %+v, %v; want both files of the first version, bytes intact", files, err)
	}
	files, err = s.SkillVersionFiles(ctx, sk.ID, second.ID)
	if err != nil || len(files) != 1 || string(files[0].Content) != "v2" {
		t.Fatalf("SkillVersionFiles(second) = %+v, %v; want its one file", files, err)
	}

	if _, err := s.CreateSkillVersion(ctx, storage.SkillVersionRow{ID: ids.New(ids.SkillVersion), SkillID: "skill_missing", Name: "pdf"}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("version of a missing skill: err = %v, want ErrNotFound", err)
	}
	if _, err := s.GetSkillVersion(ctx, "skill_other", first.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("version under another skill id: err = %v, want ErrNotFound", err)
	}
	if _, err := s.ListSkillVersions(ctx, "skill_missing", storage.ListQuery{Limit: 10}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("versions of a missing skill: err = %v, want ErrNotFound", err)
	}

	// Deleting the latest version makes the one before it the latest.
	if err := s.DeleteSkillVersion(ctx, sk.ID, second.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetSkill(ctx, sk.ID); err != nil || got.LatestVersionID != first.ID {
		t.Fatalf("after deleting the latest version: %+v, %v; want latest %s", got, err, first.ID)
	}
	if _, err := s.SkillVersionFiles(ctx, sk.ID, second.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("files of a deleted version: err = %v, want ErrNotFound", err)
	}
	if err := s.DeleteSkillVersion(ctx, sk.ID, first.ID); !errors.Is(err, storage.ErrLastSkillVersion) {
		t.Fatalf("deleting the only version: err = %v, want ErrLastSkillVersion", err)
	}
	if _, err := s.GetSkillVersion(ctx, sk.ID, first.ID); err != nil {
		t.Fatalf("the refused delete removed the version: %v", err)
	}

	other, err := s.CreateSkill(ctx, storage.SkillRow{ID: ids.New(ids.Skill), Name: "xlsx", DisplayName: "xlsx", CreatedBy: ada},
		storage.SkillVersionRow{ID: ids.New(ids.SkillVersion), Name: "xlsx", CreatedBy: ada, Files: []storage.SkillFile{{Path: "SKILL.md", Content: []byte("x")}}})
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.ListSkills(ctx, storage.ListQuery{Limit: 10})
	if err != nil || len(list) != 2 || list[0].ID != other.ID || list[1].ID != sk.ID {
		t.Fatalf("ListSkills = %+v, %v; want newest first", list, err)
	}
	if err := s.DeleteSkill(ctx, sk.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SkillVersionFiles(ctx, sk.ID, first.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("files of a deleted skill: err = %v, want ErrNotFound", err)
	}
	if err := s.DeleteSkill(ctx, sk.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("deleting twice: err = %v, want ErrNotFound", err)
	}
	if list, err := s.ListSkills(ctx, storage.ListQuery{Limit: 10}); err != nil || len(list) != 1 || list[0].ID != other.ID {
		t.Fatalf("ListSkills after delete = %+v, %v; want the other skill only", list, err)
	}
}
