package shadow

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
)

// TestReadBaseBackup takes a backup of a real server: the data directory's
// archive holds the cluster files and a table's heap file, no WAL segment,
// and the positions are ordered. A visit error ends the backup with it.
func TestReadBaseBackup(t *testing.T) {
	src := testrig.StartPostgres(t)
	src.Exec(t, "CREATE TABLE loadme AS SELECT g FROM generate_series(1, 1000) g")
	heap := src.QueryString(t, "SELECT pg_relation_filepath('loadme')")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	seen := map[string]int64{}
	archives := 0
	start, end, err := ReadBaseBackup(ctx, src.DSN(), BaseBackupOptions{Label: "export-test", Fast: true}, nil,
		func(spc BackupTablespace, r io.Reader) error {
			archives++
			if spc.OID != 0 {
				t.Errorf("unexpected tablespace %+v", spc)
			}
			tr := tar.NewReader(r)
			for {
				hdr, err := tr.Next()
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return err
				}
				seen[hdr.Name] = hdr.Size
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	if archives != 1 || start == 0 || end < start {
		t.Fatalf("archives %d, start %s, end %s", archives, start, end)
	}
	for _, name := range []string{"PG_VERSION", "global/pg_control", "pg_xact/0000", heap} {
		if _, ok := seen[name]; !ok {
			t.Errorf("%s not in the archive", name)
		}
	}
	if seen[heap] < 8192 {
		t.Errorf("heap file %s has %d bytes", heap, seen[heap])
	}
	for name, size := range seen {
		if strings.HasPrefix(name, "pg_wal/") && size > 0 {
			t.Errorf("WAL in a no-WAL backup: %s", name)
		}
	}

	boom := errors.New("visit failed")
	_, _, err = ReadBaseBackup(ctx, src.DSN(), BaseBackupOptions{Fast: true}, nil,
		func(BackupTablespace, io.Reader) error { return boom })
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "base.tar") {
		t.Fatalf("visit error: %v", err)
	}
}
