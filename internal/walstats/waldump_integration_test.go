package walstats

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
)

// indexWorkload touches the rmgrs pgbench does not: every index access
// method, sequences, logical messages, relmap, multixacts, truncation,
// database creation and a vacuum.
const indexWorkload = `
CREATE TABLE ws_docs (id serial PRIMARY KEY, tags text[], body tsvector, pos point, rng int4range, h text);
INSERT INTO ws_docs (tags, body, pos, rng, h)
  SELECT ARRAY['t' || (g % 13), 'u' || (g % 7)], to_tsvector('simple', 'word' || g || ' other' || (g % 5)),
         point(g % 100, g / 100), int4range(g, g + 10), md5(g::text)
  FROM generate_series(1, 3000) g;
CREATE INDEX ws_docs_gin ON ws_docs USING gin (tags);
CREATE INDEX ws_docs_fts ON ws_docs USING gin (body);
CREATE INDEX ws_docs_gist ON ws_docs USING gist (rng);
CREATE INDEX ws_docs_spgist ON ws_docs USING spgist (pos);
CREATE INDEX ws_docs_hash ON ws_docs USING hash (h);
CREATE INDEX ws_docs_brin ON ws_docs USING brin (id);
INSERT INTO ws_docs (tags, body, pos, rng, h)
  SELECT ARRAY['n' || g], to_tsvector('simple', 'new' || g), point(g, g), int4range(g, g + 1), md5((g * 7)::text)
  FROM generate_series(1, 2000) g;
UPDATE ws_docs SET h = md5(h) WHERE id % 3 = 0;
DELETE FROM ws_docs WHERE id % 5 = 0;
VACUUM ws_docs;
CREATE SEQUENCE ws_seq;
SELECT nextval('ws_seq') FROM generate_series(1, 100);
SELECT pg_logical_emit_message(true, 'walshadow', 'transactional message');
SELECT pg_logical_emit_message(false, 'walshadow', 'non-transactional message');
BEGIN;
SELECT * FROM ws_docs WHERE id < 10 FOR SHARE;
COMMIT;
VACUUM FULL pg_class;
TRUNCATE ws_docs;
CREATE DATABASE ws_db;
DROP DATABASE ws_db;
CHECKPOINT;
`

// TestCollectMatchesWaldump runs a varied workload on a scratch PostgreSQL
// 15, copies its WAL and compares the report, per record type, with
// pg_waldump --stats=record over the same segments.
func TestCollectMatchesWaldump(t *testing.T) {
	pg := testrig.StartPostgres(t, testrig.WithMaxPreparedTransactions(5))
	pg.PGBench(t, 1, testrig.PGBenchOptions{Transactions: 500})
	pg.RunSQLScript(t, testrig.DDLScript)
	// Compressed images too: pglz from here on.
	pg.SetConf(t, "wal_compression", "pglz")
	pg.RunSQLScript(t, indexWorkload)
	pg.PGBench(t, 1, testrig.PGBenchOptions{NoInit: true, Transactions: 200})

	dir := t.TempDir()
	names := pg.CopyWALSegments(t, dir)
	if len(names) == 0 {
		t.Fatal("no WAL segments copied")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	want, err := testrig.WaldumpStats(ctx, pg.BinDir(), dir, names[0], names[len(names)-1])
	if err != nil {
		t.Fatal(err)
	}
	got, err := Collect(ctx, []string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	compareWithWaldump(t, got, want)
	if got.SegmentsRead != len(names) || got.LastSegment != names[len(names)-1] || got.Timeline != 1 {
		t.Errorf("segments read %d (last %s) timeline %d; copied %d ending %s", got.SegmentsRead, got.LastSegment, got.Timeline, len(names), names[len(names)-1])
	}
	if got.CRCFailures != 0 || got.Stop.Reason != StopEndOfInput {
		t.Errorf("crc failures %d stop %+v", got.CRCFailures, got.Stop)
	}
	if got.FPICount == 0 || got.FPIBytes == 0 {
		t.Errorf("no full-page images seen: the workload should produce some")
	}
	t.Logf("%d segments, %d records, %d bytes, %d record types", got.SegmentsRead, got.Records, got.TotalBytes, len(got.RecordTypes))

	// The same files named one by one give the same numbers.
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = filepath.Join(dir, n)
	}
	again, err := Collect(ctx, paths, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Records != got.Records || again.TotalBytes != got.TotalBytes || again.FPIBytes != got.FPIBytes {
		t.Errorf("named files: %d records %d bytes, directory: %d records %d bytes", again.Records, again.TotalBytes, got.Records, got.TotalBytes)
	}
}

func compareWithWaldump(t *testing.T, got *Report, want *testrig.WaldumpReport) {
	t.Helper()
	if uint64(got.StartLSN) != uint64(want.Start) || uint64(got.EndLSN) != uint64(want.End) {
		t.Errorf("range %s..%s, pg_waldump %s..%s", got.StartLSN, got.EndLSN, want.Start, want.End)
	}
	if got.Records != want.Totals.Count || got.RecordBytes != want.Totals.RecordBytes ||
		got.FPIBytes != want.Totals.FPIBytes || got.TotalBytes != want.Totals.CombinedBytes {
		t.Errorf("totals: records %d record bytes %d fpi bytes %d total %d; pg_waldump %+v",
			got.Records, got.RecordBytes, got.FPIBytes, got.TotalBytes, want.Totals)
	}
	if len(got.RecordTypes) != len(want.Rows) {
		t.Errorf("%d record types, pg_waldump has %d", len(got.RecordTypes), len(want.Rows))
	}
	// Both lists are in rmgr id, then info order: compare pairwise so a
	// misnamed type shows up as such.
	for i := 0; i < max(len(got.RecordTypes), len(want.Rows)); i++ {
		var g RecordTypeStats
		var w testrig.WaldumpRow
		if i < len(got.RecordTypes) {
			g = got.RecordTypes[i]
		}
		if i < len(want.Rows) {
			w = want.Rows[i]
		}
		if g.Rmgr != w.Rmgr || g.Type != w.Type || g.Count != w.Count || g.RecordBytes != w.RecordBytes ||
			g.FPIBytes != w.FPIBytes || g.CombinedBytes != w.CombinedBytes {
			t.Errorf("row %d: got %s %+v, pg_waldump %s/%s %+v", i, g.Name, g.Stats, w.Rmgr, w.Type, w)
		}
	}
}
