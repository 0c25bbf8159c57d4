package pagewalk

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/testrig"
)

var update = flag.Bool("update", false, "capture the golden backups from a real PostgreSQL 15 into testdata")

const goldenDir = "testdata/golden"

// golden is one captured scenario: the walk's part of two backups of the
// same state (before and after a reader set hint bits), the descriptors
// read from the catalogs, and the rows SELECT saw.
type golden struct {
	DbOid  uint32
	Target Target
	Want   []string
}

// captureGolden runs the scenario on a real server and writes testdata.
func captureGolden(t *testing.T) {
	src := testrig.StartPostgres(t)
	src.Exec(t, scenarioSetup(200))
	src.Exec(t, scenarioAborted)
	openScenarioTransactions(t, src)
	dbOid, tgt := scenarioTarget(t, src)
	unhinted := takeBackup(t, src, dbOid, tgt)
	want := selectRows(t, src) // sets the hint bits the second backup carries
	hinted := takeBackup(t, src, dbOid, tgt)
	if err := os.MkdirAll(goldenDir, 0o755); err != nil {
		t.Fatal(err)
	}
	meta, err := json.MarshalIndent(golden{DbOid: dbOid, Target: tgt, Want: want}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, "scenario.json", meta)
	writeFile(t, "unhinted.tar.gz", gz(t, unhinted))
	writeFile(t, "hinted.tar.gz", gz(t, hinted))
}

func writeFile(t *testing.T, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(goldenDir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func gz(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func loadGolden(t testing.TB) (golden, map[string][]byte) {
	t.Helper()
	var g golden
	meta, err := os.ReadFile(filepath.Join(goldenDir, "scenario.json"))
	if err != nil {
		t.Fatalf("%v (capture with go test -run TestWalkGolden -update)", err)
	}
	if err := json.Unmarshal(meta, &g); err != nil {
		t.Fatal(err)
	}
	archives := map[string][]byte{}
	for _, name := range []string{"unhinted", "hinted"} {
		f, err := os.Open(filepath.Join(goldenDir, name+".tar.gz"))
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(zr)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		archives[name] = b
	}
	return g, archives
}

// TestWalkGolden walks captured backups of a table with committed, aborted,
// deleted, updated (HOT, non-HOT, key-changing), locked (multixacts: lock
// only, committed and in-progress updater), speculative and TOASTed
// (inline compressed, external compressed and uncompressed) rows plus an
// open transaction's changes, and expects exactly the rows SELECT saw, with
// and without hint bits.
func TestWalkGolden(t *testing.T) {
	if *update {
		captureGolden(t)
	}
	g, archives := loadGolden(t)
	var deferred []int64
	for _, name := range []string{"unhinted", "hinted"} {
		rows, st, err := walkAll(t, archives[name], g.DbOid, g.Target, 0x2000, Config{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := renderRows(t, rows); !slices.Equal(got, g.Want) {
			reportDiff(t, name, got, g.Want)
		}
		if st.SkippedInvisible == 0 || st.Emitted != int64(len(g.Want)) {
			t.Errorf("%s: stats %+v", name, st)
		}
		deferred = append(deferred, st.Deferred)
	}
	if deferred[0] <= deferred[1] {
		t.Errorf("deferred unhinted %d, hinted %d: hint bits should have decided more tuples", deferred[0], deferred[1])
	}
}

// TestWalkSpill defers through a spool far below the deferred volume: the
// rows spill to the directory given and still come out exactly; without a
// directory the walk fails and says why.
func TestWalkSpill(t *testing.T) {
	g, archives := loadGolden(t)
	dir := t.TempDir()
	rows, st, err := walkAll(t, archives["unhinted"], g.DbOid, g.Target, 1, Config{SpoolBytes: 4096, SpillDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := renderRows(t, rows); !slices.Equal(got, g.Want) {
		reportDiff(t, "spill", got, g.Want)
	}
	if st.SpilledBytes == 0 {
		t.Errorf("nothing spilled: %+v", st)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("spill files left behind: %v", left)
	}
	_, _, err = walkAll(t, archives["unhinted"], g.DbOid, g.Target, 1, Config{SpoolBytes: 4096})
	if err == nil || !strings.Contains(err.Error(), "spool budget") {
		t.Fatalf("no spill dir: err %v, want the spool budget error", err)
	}
}

// TestWalkFailsClosed: missing pg_xact, a missing relation file, a torn
// item and a foreign tablespace are errors, never fewer rows.
func TestWalkFailsClosed(t *testing.T) {
	g, archives := loadGolden(t)
	arc := archives["unhinted"]
	drop := func(prefix string) []byte {
		var out bytes.Buffer
		if err := rewriteArchive(arc, &out, func(name string, data []byte) ([]byte, bool) {
			return data, !strings.HasPrefix(name, prefix)
		}); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	if _, _, err := walkAll(t, drop("pg_xact/"), g.DbOid, g.Target, 1, Config{}); err == nil || !strings.Contains(err.Error(), "pg_xact") {
		t.Errorf("without pg_xact: %v", err)
	}
	main := relPath(g.DbOid, g.Target.Desc.Rfn.RelNum)
	if _, _, err := walkAll(t, drop(main), g.DbOid, g.Target, 1, Config{}); err == nil || !strings.Contains(err.Error(), "not in the backup archive") {
		t.Errorf("without the relation file: %v", err)
	}
	// Corrupt the first LP_NORMAL line pointer's length of block 0.
	var torn bytes.Buffer
	if err := rewriteArchive(arc, &torn, func(name string, data []byte) ([]byte, bool) {
		if name == main {
			data = slices.Clone(data)
			data[pageHeaderSize+2] = 0 // lp_len's low bits and lp_flags' high bit
			data[pageHeaderSize+3] = 0
			data[pageHeaderSize+1] |= 0x80 // lp_flags = LP_NORMAL
		}
		return data, true
	}); err != nil {
		t.Fatal(err)
	}
	_, _, err := walkAll(t, torn.Bytes(), g.DbOid, g.Target, 1, Config{})
	if err == nil || !strings.Contains(err.Error(), main+" block 0 item 1") {
		t.Errorf("torn item: %v", err)
	}
	foreign := g.Target
	d := *foreign.Desc
	d.Rfn.SpcOid = 16500
	foreign.Desc = &d
	if _, _, err := walkAll(t, arc, g.DbOid, foreign, 1, Config{}); err == nil || !strings.Contains(err.Error(), "tablespace 16500") {
		t.Errorf("foreign tablespace: %v", err)
	}
	if _, _, err := walkAll(t, arc, g.DbOid, g.Target, 1, Config{DataChecksums: true}); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("checksums claimed on a cluster without them: %v", err)
	}
}
