package session

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/walshadow/walshadow/internal/filter"
	"github.com/walshadow/walshadow/internal/shadow"
	"github.com/walshadow/walshadow/internal/wal"
)

// seedFromShadowDir teaches the filter's catalog tracker where catalogs
// live: the relation maps in the shadow's data directory (mapped catalogs:
// pg_class, pg_attribute, ... and the shared ones), plus the relocated
// catalogs (catalogs whose relfilenode moved past 16384 by VACUUM FULL or
// CLUSTER) given.
func seedFromShadowDir(t *filter.CatalogTracker, shadowDir string, relocated []shadow.RelFile) error {
	seedMap := func(db uint32, path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var m wal.RelMapFile
		if err := m.Decode(b); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		t.SeedRelMap(db, &m)
		return nil
	}
	if err := seedMap(0, filepath.Join(shadowDir, "global", "pg_filenode.map")); err != nil {
		return err
	}
	ents, err := os.ReadDir(filepath.Join(shadowDir, "base"))
	if err != nil {
		return err
	}
	for _, e := range ents {
		db, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil || !e.IsDir() {
			continue
		}
		if err := seedMap(uint32(db), filepath.Join(shadowDir, "base", e.Name(), "pg_filenode.map")); err != nil {
			return err
		}
	}
	byDB := map[uint32][]uint32{}
	for _, r := range relocated {
		byDB[r.DB] = append(byDB[r.DB], r.Filenode)
	}
	for db, rels := range byDB {
		t.Seed(db, rels)
	}
	return nil
}

// seedCatalogs seeds the live filter: relation maps from the shadow's data
// directory (as of its last replay) and relocated catalogs as the source has
// them now.
func seedCatalogs(ctx context.Context, t *filter.CatalogTracker, shadowDir, sourceDSN string, log *slog.Logger) error {
	relocated, err := shadow.QueryRelocatedCatalogs(ctx, sourceDSN, log)
	if err != nil {
		return fmt.Errorf("reading the source's catalog filenodes: %w", err)
	}
	return seedFromShadowDir(t, shadowDir, relocated)
}
