package shadow

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// fakeSource answers forEachDatabase's connections and second looks from
// a map of the databases the source has now (OID to name).
type fakeSource struct {
	now     map[uint32]string
	fail    map[string]error // a connection error by name, for a database that exists
	visited []string
	lookErr error
}

func (f *fakeSource) visit(_ context.Context, d sourceDatabase) error {
	f.visited = append(f.visited, d.name)
	if err, ok := f.fail[d.name]; ok {
		return err
	}
	if name, ok := f.now[d.oid]; !ok || name != d.name {
		return fmt.Errorf("connecting to source database %q for its catalog filenodes: %w", d.name,
			&pgconn.PgError{Severity: "FATAL", Code: "3D000", Message: fmt.Sprintf("database %q does not exist", d.name)})
	}
	return nil
}

func (f *fakeSource) lookUp(_ context.Context, oid uint32) (string, bool, error) {
	if f.lookErr != nil {
		return "", false, f.lookErr
	}
	name, ok := f.now[oid]
	return name, ok, nil
}

func TestCatalogFilenodesOfDatabases(t *testing.T) {
	listed := []sourceDatabase{{1, "template1"}, {5, "postgres"}, {16384, "regression_utf8"}, {16390, "other"}}
	denied := errors.New(`connecting to source database "other" for its catalog filenodes: FATAL: permission denied for database "other" (SQLSTATE 42501)`)
	for _, tc := range []struct {
		name        string
		src         fakeSource
		wantVisited []string
		wantSkipped []sourceDatabase
		wantErr     string
	}{{
		name:        "all there",
		src:         fakeSource{now: map[uint32]string{1: "template1", 5: "postgres", 16384: "regression_utf8", 16390: "other"}},
		wantVisited: []string{"template1", "postgres", "regression_utf8", "other"},
	}, {
		name:        "dropped after the listing is skipped",
		src:         fakeSource{now: map[uint32]string{1: "template1", 5: "postgres", 16390: "other"}},
		wantVisited: []string{"template1", "postgres", "regression_utf8", "other"},
		wantSkipped: []sourceDatabase{{16384, "regression_utf8"}},
	}, {
		name:        "renamed after the listing is read under its new name",
		src:         fakeSource{now: map[uint32]string{1: "template1", 5: "postgres", 16384: "regression_renamed", 16390: "other"}},
		wantVisited: []string{"template1", "postgres", "regression_utf8", "regression_renamed", "other"},
	}, {
		name: "another error of a database that exists fails",
		src: fakeSource{now: map[uint32]string{1: "template1", 5: "postgres", 16384: "regression_utf8", 16390: "other"},
			fail: map[string]error{"other": denied}},
		wantVisited: []string{"template1", "postgres", "regression_utf8", "other"},
		wantErr:     "permission denied",
	}, {
		name: "any error of a database gone on a second look skips it",
		src: fakeSource{now: map[uint32]string{1: "template1", 5: "postgres", 16384: "regression_utf8"},
			fail: map[string]error{"other": errors.New("terminating connection due to administrator command (SQLSTATE 57P01)")}},
		wantVisited: []string{"template1", "postgres", "regression_utf8", "other"},
		wantSkipped: []sourceDatabase{{16390, "other"}},
	}, {
		name: "a failed second look fails",
		src: fakeSource{now: map[uint32]string{1: "template1", 5: "postgres", 16390: "other"},
			lookErr: errors.New("looking source database 16384 up again: conn closed")},
		wantVisited: []string{"template1", "postgres", "regression_utf8"},
		wantErr:     `database "regression_utf8" does not exist (SQLSTATE 3D000) (and looking source database 16384 up again: conn closed)`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			skipped, err := forEachDatabase(context.Background(), listed, nil, tc.src.visit, tc.src.lookUp)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			if !reflect.DeepEqual(tc.src.visited, tc.wantVisited) {
				t.Errorf("visited %v, want %v", tc.src.visited, tc.wantVisited)
			}
			if !reflect.DeepEqual(skipped, tc.wantSkipped) {
				t.Errorf("skipped %v, want %v", skipped, tc.wantSkipped)
			}
		})
	}
}

func TestCatalogFilenodesRenameChase(t *testing.T) {
	// A database renamed again before every connection is followed a few
	// times, then its error stands.
	n := 0
	visit := func(_ context.Context, d sourceDatabase) error {
		return fmt.Errorf("database %q does not exist", d.name)
	}
	lookUp := func(context.Context, uint32) (string, bool, error) {
		n++
		return fmt.Sprintf("moving_%d", n), true, nil
	}
	_, err := forEachDatabase(context.Background(), []sourceDatabase{{16384, "moving"}}, nil, visit, lookUp)
	if err == nil || n != maxRenameRetries+1 {
		t.Fatalf("after %d looks: %v", n, err)
	}
}

func TestCatalogFilenodesMissingDatabase(t *testing.T) {
	gone := fmt.Errorf("connecting: %w", &pgconn.PgError{Code: "3D000"})
	other := fmt.Errorf("connecting: %w", &pgconn.PgError{Code: "28P01"})
	if !missingDatabase(gone) || missingDatabase(other) || missingDatabase(errors.New("3D000")) {
		t.Fatal("missingDatabase misclassifies")
	}
}
