package pagewalk

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/shadow"
	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// The scenario table: fixed and varlena columns, values stored inline,
// compressed inline (big, short repeats), external compressed (big, a long
// random-looking prefix) and external uncompressed (ext, STORAGE EXTERNAL).
const scenarioColumns = "id, n, s, b, big, ext"

func scenarioSetup(n int) string {
	return fmt.Sprintf(`
CREATE TABLE t (id int PRIMARY KEY, n int, s text, b bytea, big text, ext text) WITH (fillfactor = 70);
ALTER TABLE t ALTER COLUMN ext SET STORAGE EXTERNAL;
INSERT INTO t SELECT g, g, md5(g::text), decode(md5(g::text), 'hex'),
  CASE WHEN g %% 97 = 0 THEN (SELECT string_agg(md5((g * 1000 + i)::text), '') FROM generate_series(1, 300) i) || repeat('z', 20000)
       WHEN g %% 53 = 0 THEN repeat(md5(g::text), 100) END,
  CASE WHEN g %% 89 = 0 THEN repeat('e' || g, 1500) END
FROM generate_series(1, %d) g;
DELETE FROM t WHERE id %% 7 = 0;
UPDATE t SET n = n + 1 WHERE id %% 5 = 0;                      -- mostly HOT (fillfactor 70)
UPDATE t SET id = id + 1000000 WHERE id %% 11 = 0;             -- key change: never HOT
UPDATE t SET big = big || 'u' WHERE id %% 97 = 0 AND id %% 2 = 0; -- re-toasts: old chunks deleted
UPDATE t SET n = -n WHERE id %% 89 = 0;                        -- keeps ext's TOAST pointer
INSERT INTO t VALUES (1, -1, 'conflict', NULL, NULL, NULL), (3000001, 1, 'fresh', NULL, NULL, NULL)
  ON CONFLICT (id) DO UPDATE SET n = excluded.n, s = excluded.s; -- speculative insertion
`, n)
}

const scenarioAborted = `
BEGIN;
INSERT INTO t SELECT g + 2000000, g, 'aborted', NULL, repeat(md5(g::text), 300) || (SELECT string_agg(md5((g * 7 + i)::text), '') FROM generate_series(1, 200) i), NULL
  FROM generate_series(1, 20) g;
UPDATE t SET n = 0 WHERE id % 3 = 0;
DELETE FROM t WHERE id % 4 = 0;
ROLLBACK;
`

// openScenarioTransactions leaves transactions open across the backup:
// lockers making multixacts (lock-only, and with a committed or an
// in-progress updater) and a writer whose rows must not appear.
func openScenarioTransactions(t *testing.T, src *testrig.Postgres) {
	t.Helper()
	ctx := context.Background()
	begin := func(sql ...string) {
		conn := src.Connect(t)
		for _, s := range append([]string{"BEGIN"}, sql...) {
			if _, err := conn.Exec(ctx, s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}
	begin("SELECT id FROM t WHERE id BETWEEN 1 AND 50 FOR KEY SHARE")
	begin("SELECT id FROM t WHERE id BETWEEN 1 AND 20 FOR SHARE")    // multixact, lock-only
	src.Exec(t, "UPDATE t SET n = n + 7 WHERE id BETWEEN 21 AND 30") // multixact with a committed updater
	begin("UPDATE t SET n = n + 9 WHERE id BETWEEN 41 AND 48")       // multixact with an in-progress updater
	begin("INSERT INTO t SELECT g, g, 'open', NULL, NULL, NULL FROM generate_series(4000001, 4000100) g",
		"DELETE FROM t WHERE id BETWEEN 100 AND 120",
		"UPDATE t SET n = 0 WHERE id BETWEEN 200 AND 210")
}

// scenarioTarget reads t's and its TOAST relation's descriptors from the
// source's catalogs with the shadow's own descriptor query.
func scenarioTarget(t *testing.T, src *testrig.Postgres) (dbOid uint32, tgt Target) {
	t.Helper()
	ctx := context.Background()
	conn := src.Connect(t)
	var tableOid, toastOid uint32
	if err := conn.QueryRow(ctx, `SELECT d.oid, c.oid, c.reltoastrelid FROM pg_class c, pg_database d
		WHERE c.relname = 't' AND d.datname = current_database()`).Scan(&dbOid, &tableOid, &toastOid); err != nil {
		t.Fatal(err)
	}
	descs, err := shadow.ReadDescriptors(ctx, conn, []uint32{tableOid, toastOid})
	if err != nil {
		t.Fatal(err)
	}
	if len(descs) != 2 {
		t.Fatalf("read %d descriptors, want table and TOAST", len(descs))
	}
	for i := range descs {
		if descs[i].Oid == tableOid {
			tgt.Desc = &descs[i]
		} else {
			tgt.Toast = &descs[i]
		}
	}
	return dbOid, tgt
}

// selectRows renders what SELECT sees, one line per row sorted by id.
func selectRows(t *testing.T, src *testrig.Postgres) []string {
	t.Helper()
	conn := src.Connect(t)
	rows, err := conn.Query(context.Background(), "SELECT id::text, n::text, s, b::text, big, ext FROM t ORDER BY t.id")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		vals := make([]*string, 6)
		ptrs := make([]any, 6)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = "NULL"
			if v != nil {
				parts[i] = *v
			}
		}
		out = append(out, strings.Join(parts, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// renderRows renders emitted rows like selectRows (fmt %v per field, bytea
// as PostgreSQL's hex), sorted by id.
func renderRows(t *testing.T, rows []decode.RowChange) []string {
	t.Helper()
	type keyed struct {
		id   int64
		line string
	}
	var ks []keyed
	for _, r := range rows {
		if r.Op != decode.OpInsert {
			t.Fatalf("row op %s, want insert", r.Op)
		}
		parts := make([]string, len(r.Fields))
		for i, f := range r.Fields {
			switch {
			case f.Null:
				parts[i] = "NULL"
			case f.Pending || f.Omitted:
				t.Fatalf("column %s is pending/omitted", f.Col.Name)
			default:
				if b, ok := f.Value.([]byte); ok {
					parts[i] = `\x` + hex.EncodeToString(b)
				} else {
					parts[i] = fmt.Sprintf("%v", f.Value)
				}
			}
		}
		id, err := strconv.ParseInt(parts[0], 10, 64)
		if err != nil {
			t.Fatalf("id %q: %v", parts[0], err)
		}
		ks = append(ks, keyed{id, strings.Join(parts, "|")})
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].id < ks[j].id })
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.line
	}
	return out
}

// takeBackup runs ReadBaseBackup and keeps only what a walk of tgt reads.
func takeBackup(t *testing.T, src *testrig.Postgres, dbOid uint32, tgt Target) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	_, _, err := shadow.ReadBaseBackup(ctx, src.DSN(), shadow.BaseBackupOptions{Label: "pagewalk-test", Fast: true}, nil,
		func(spc shadow.BackupTablespace, r io.Reader) error {
			if spc.OID != 0 {
				return nil
			}
			return filterArchive(r, &out, dbOid, tgt)
		})
	if err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func filterArchive(r io.Reader, dst io.Writer, dbOid uint32, tgt Target) error {
	tr := tar.NewReader(r)
	tw := tar.NewWriter(dst)
	keep := map[uint32]bool{tgt.Desc.Rfn.RelNum: true}
	if tgt.Toast != nil {
		keep[tgt.Toast.Rfn.RelNum] = true
	}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		dir, file := path.Split(hdr.Name)
		ok := dir == "pg_xact/" || dir == "pg_multixact/offsets/" || dir == "pg_multixact/members/"
		if dir == fmt.Sprintf("base/%d/", dbOid) {
			rfn, _, isMain := parseRelFile(file)
			ok = isMain && keep[rfn]
		}
		if !ok || hdr.Typeflag != tar.TypeReg {
			continue
		}
		hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = time.Unix(0, 0), time.Time{}, time.Time{}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	return tw.Close()
}

// walkAll walks archive and collects every emitted row.
func walkAll(t testing.TB, archive []byte, dbOid uint32, tgt Target, lsn wal.LSN, cfg Config) ([]decode.RowChange, Stats, error) {
	cfg.DbOid, cfg.LSN = dbOid, lsn
	cfg.Targets = map[uint32]Target{tgt.Desc.Rfn.RelNum: tgt}
	var rows []decode.RowChange
	st, err := Walk(context.Background(), bytes.NewReader(archive), cfg, func(oid uint32, rs []decode.RowChange) error {
		if oid != tgt.Desc.Oid {
			t.Errorf("emitted for oid %d, want %d", oid, tgt.Desc.Oid)
		}
		rows = append(rows, rs...)
		return nil
	})
	return rows, st, err
}

// rewriteArchive copies a tar through fn, which may replace an entry's
// bytes or drop it (keep false).
func rewriteArchive(archive []byte, dst io.Writer, fn func(name string, data []byte) (out []byte, keep bool)) error {
	tr := tar.NewReader(bytes.NewReader(archive))
	tw := tar.NewWriter(dst)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		data, keep := fn(hdr.Name, data)
		if !keep {
			continue
		}
		hdr.Size = int64(len(data))
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return tw.Close()
}

func relPath(dbOid, rfn uint32) string { return fmt.Sprintf("base/%d/%d", dbOid, rfn) }
