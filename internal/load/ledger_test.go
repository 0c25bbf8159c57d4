package load

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/statefile"
	"github.com/walshadow/walshadow/internal/statefile/statefiletest"
	"github.com/walshadow/walshadow/internal/wal"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func sampleEntry(oid uint32, table string) Entry {
	return Entry{
		Oid: oid, Schema: "public", Table: table, Mode: ModeCopy, Phase: PhaseLoading,
		Coverage: 0x5A3F1C8, Database: "shop", Target: table, Staging: table + "__load",
		Old: table + "__old", StagingUUID: "5e0c2b1a-0000-4000-8000-000000000001", StaleDatabase: "shop_old", Stale: table + "_v1", Attempt: 2,
		Rows: 1234567, Bytes: 230_000_000,
		StartedAt: time.Date(2026, 11, 30, 14, 2, 3, 500_000_001, time.UTC),
		LastError: `COPY "public"."orders": connection reset`,
		Reason:    `failed at 0/5A3F000: insert into "shop"."orders": cannot parse`, FailedAt: 0x5A3F000,
	}
}

// parkedEntry is sampleEntry parked after a streak of identical failures.
func parkedEntry(oid uint32, table string) Entry {
	e := sampleEntry(oid, table)
	e.Loads = 5
	e.Streak = Streak{Failure: Failure{Signature: `initial load of public.orders, row #: column "v": value # does not fit Int8`}, Count: 2, Attempt: 2}
	e.Parked = &Parking{Since: time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC), Reason: `initial load of public.orders, row 17: column "v": value 100000 does not fit Int8`,
		At: 0x5A3F000, Count: 2, Remedy: "give the column a type that holds the value",
		Under: Conditions{Shape: 0x5A30000, Config: "0123456789abcdef", ServerVersion: "18.16.1.0", ServerBoot: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)}}
	return e
}

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{ModeNone, ModeCopy, ModeBaseBackup} {
		if got, err := ParseMode(string(m)); got != m || err != nil {
			t.Errorf("ParseMode(%q) = %q, %v", m, got, err)
		}
	}
	for _, bad := range []string{"", "COPY", "basebackup", "snapshot"} {
		_, err := ParseMode(bad)
		if err == nil || !strings.Contains(err.Error(), "none, copy and base_backup") || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("ParseMode(%q): %v, want an error naming the value and the valid modes", bad, err)
		}
	}
}

func TestLedgerRoundTrip(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLedger(dir)
	if err != nil || len(l.All()) != 0 {
		t.Fatalf("fresh dir: %v, %v", l.All(), err)
	}
	orders := sampleEntry(16384, "orders")
	// A local time with a monotonic reading is stored as UTC without it.
	orders.FinishedAt = time.Now().In(time.FixedZone("CET", 3600))
	items := sampleEntry(16390, "items")
	items.Schema, items.Mode, items.Phase, items.Coverage = "sales", ModeBaseBackup, PhaseDone, 0x1_0000_0010
	bare := Entry{Oid: 20000, Schema: "a", Table: "b", Mode: ModeNone, Phase: PhasePublishing}
	parked := parkedEntry(20001, "parked")
	for _, e := range []Entry{orders, items, bare, parked} {
		if err := l.Put(e); err != nil {
			t.Fatal(err)
		}
	}
	got, ok := l.Get(16384)
	if !ok || !got.FinishedAt.Equal(orders.FinishedAt) || got.FinishedAt.Location() != time.UTC || got.Rows != orders.Rows {
		t.Fatalf("Get after Put: %+v %v", got, ok)
	}
	want := l.All()
	if names := []string{want[0].Schema + "." + want[0].Table, want[1].Schema + "." + want[1].Table, want[2].Schema + "." + want[2].Table, want[3].Schema + "." + want[3].Table}; !reflect.DeepEqual(names, []string{"a.b", "public.orders", "public.parked", "sales.items"}) {
		t.Fatalf("All not sorted by schema, table: %v", names)
	}

	reopened, err := OpenLedger(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(reopened.All(), want) {
		t.Fatalf("reopened:\n%+v\nwant\n%+v", reopened.All(), want)
	}
	b := snapshotFile(t, reopened)
	for _, s := range []string{`"format": "walshadow-loads"`, `"version": 4`, `"coverage_lsn": "1/00000010"`, `"parked": {`, `"server_boot": "2026-11-30T08:00:00Z"`,
		`"started_at": "2026-11-30T14:02:03.500000001Z"`, `"mode": "base_backup"`, `"crc32c": `} {
		if !strings.Contains(string(b), s) {
			t.Errorf("file lacks %s:\n%s", s, b)
		}
	}
	if strings.Contains(string(b), `"old": ""`) || strings.Contains(string(b), `"started_at": ""`) {
		t.Errorf("empty optional fields written:\n%s", b)
	}

	if err := reopened.Delete(16384); err != nil {
		t.Fatal(err)
	}
	if err := reopened.Delete(99999); err != nil {
		t.Fatalf("deleting an absent oid: %v", err)
	}
	if _, ok := reopened.Get(16384); ok {
		t.Fatal("deleted entry still there")
	}
	again, err := OpenLedger(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.All()) != 3 {
		t.Fatalf("after delete and reopen: %+v", again.All())
	}
	if _, err := os.Stat(filepath.Join(dir, LedgerFile+".tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left behind: %v", err)
	}
}

func TestLedgerPutRefusesWhatCannotRoundTrip(t *testing.T) {
	l, err := OpenLedger(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ok := sampleEntry(1, "t")
	for name, mutate := range map[string]func(*Entry){
		"oid 0":         func(e *Entry) { e.Oid = 0 },
		"no table":      func(e *Entry) { e.Table = "" },
		"bad mode":      func(e *Entry) { e.Mode = "fast" },
		"no phase":      func(e *Entry) { e.Phase = "" },
		"negative rows": func(e *Entry) { e.Rows = -1 },
		"bad utf8":      func(e *Entry) { e.Target = "t\xff" },
		"year 10000":    func(e *Entry) { e.StartedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
	} {
		e := ok
		mutate(&e)
		if err := l.Put(e); err == nil {
			t.Errorf("%s: Put accepted %+v", name, e)
		}
	}
	if len(l.All()) != 0 {
		t.Fatalf("refused entries recorded: %+v", l.All())
	}
}

func TestLedgerFailedWriteLeavesLedgerUnchanged(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLedger(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Put(sampleEntry(1, "kept")); err != nil {
		t.Fatal(err)
	}
	// A directory in the temporary file's place makes the write fail, even
	// as root: with its journal closed, the next change rewrites the file.
	if err := os.Mkdir(filepath.Join(dir, LedgerFile+".tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	l.j.Close()
	err = l.Put(sampleEntry(2, "lost"))
	if err == nil || !strings.Contains(err.Error(), "public.lost") || !strings.Contains(err.Error(), LedgerFile) {
		t.Fatalf("Put over a blocked temporary file: %v, want an error naming the table and the file", err)
	}
	if err := l.Delete(1); err == nil {
		t.Fatal("Delete over a blocked temporary file succeeded")
	}
	if _, ok := l.Get(2); ok {
		t.Fatal("failed Put is visible")
	}
	if _, ok := l.Get(1); !ok {
		t.Fatal("failed Delete removed the entry")
	}
	os.Remove(filepath.Join(dir, LedgerFile+".tmp"))
	reopened, err := OpenLedger(dir)
	if err != nil || len(reopened.All()) != 1 || reopened.All()[0].Table != "kept" {
		t.Fatalf("file after failed writes: %+v %v", reopened.All(), err)
	}
}

func TestLedgerConcurrentPut(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLedger(dir)
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 6, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				oid := uint32(1000 + w*each + i)
				e := sampleEntry(oid, fmt.Sprintf("t%d", oid))
				// Every worker also rewrites a shared entry: the last write wins, whole.
				shared := sampleEntry(1, "shared")
				shared.Attempt = w*each + i
				for _, e := range []Entry{e, shared} {
					if err := l.Put(e); err != nil {
						errs <- err
					}
				}
				_ = l.All()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	reopened, err := OpenLedger(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(reopened.All()); got != workers*each+1 {
		t.Fatalf("reopened ledger holds %d entries, want %d", got, workers*each+1)
	}
	if !reflect.DeepEqual(reopened.All(), l.All()) {
		t.Fatal("file and memory disagree after concurrent Puts")
	}
}

func writeLedgerFile(t *testing.T, b []byte) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, LedgerFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// resignEnvelope recomputes an envelope's crc32c over its body as it is
// in b, so that only an edit of the body is at fault.
func resignEnvelope(t testing.TB, b []byte) []byte {
	t.Helper()
	s := string(b)
	i := strings.Index(s, `"body": `)
	j := strings.LastIndex(s, "\n}")
	if i < 0 || j < i {
		t.Fatalf("not an envelope: %q", b)
	}
	body := s[i+len(`"body": `) : j]
	re := regexp.MustCompile(`"crc32c": [0-9]+`)
	return []byte(re.ReplaceAllString(s, fmt.Sprintf(`"crc32c": %d`, statefile.CRC([]byte(body)))))
}

func TestLedgerCorruptVersusTruncated(t *testing.T) {
	good := encodeLedger(map[uint32]Entry{16384: sampleEntry(16384, "orders"), 16390: sampleEntry(16390, "items")}, nil)
	if _, err := OpenLedger(writeLedgerFile(t, good)); err != nil {
		t.Fatalf("good file refused: %v", err)
	}
	// withBody encodes a body edited from one entry, signed right.
	withBody := func(edit func(*ledgerBody)) []byte {
		body := ledgerBody{Entries: []entryJSON{{Oid: 7, Schema: "s", Table: "t", Mode: "copy", Phase: "loading", Coverage: "0/10"}}}
		edit(&body)
		b, err := ledgerSpec.Encode(body)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	corrupt := map[string]struct {
		file []byte
		says string
	}{
		"bad crc":         {[]byte(strings.Replace(string(good), `"rows": 1234567`, `"rows": 1234568`, 1)), "checksum"},
		"unknown field":   {[]byte(strings.Replace(string(good), `"format"`, `"extra": 1, "format"`, 1)), `unknown field "extra"`},
		"unknown nested":  {resignEnvelope(t, []byte(strings.Replace(string(good), `"oid"`, `"priority": 1, "oid"`, 1))), `unknown field "priority"`},
		"wrong version":   {[]byte(strings.Replace(string(good), `"version": 4`, `"version": 5`, 1)), "version 5"},
		"bad streak":      {withBody(func(b *ledgerBody) { b.Entries[0].Streak = &streakJSON{Signature: "x", Count: 0} }), "streak count 0"},
		"parked, no time": {withBody(func(b *ledgerBody) { b.Entries[0].Parked = &parkedJSON{Reason: "x", Count: 2} }), "parked without a time"},
		"bad reloads":     {withBody(func(b *ledgerBody) { b.Reloads = map[string]int64{"type_change": -1} }), `reloads: "type_change"`},
		"wrong format":    {[]byte(strings.Replace(string(good), `"walshadow-loads"`, `"walshadow-manifest"`, 1)), `format "walshadow-manifest"`},
		"bad lsn":         {withBody(func(b *ledgerBody) { b.Entries[0].Coverage = "10" }), `coverage_lsn "10"`},
		"bad time":        {withBody(func(b *ledgerBody) { b.Entries[0].StartedAt = "yesterday" }), `started_at "yesterday"`},
		"bad phase":       {withBody(func(b *ledgerBody) { b.Entries[0].Phase = "half" }), `phase "half"`},
		"duplicate oid":   {withBody(func(b *ledgerBody) { b.Entries = append(b.Entries, b.Entries[0]) }), "oid 7 appears twice"},
		"garbage":         {[]byte("\x00\x01not json"), "invalid character"},
		"syntax error":    {[]byte(strings.Replace(string(good), `"entries": [`, `"entries": ]`, 1)), "invalid character"},
		"trailing data":   {append(append([]byte{}, good...), "{}"...), "after top-level value"},
		"array prefix":    {[]byte(`[{"format":"walshadow-loads"`), "unexpected end"},
		"v1, bad crc":     {[]byte(strings.Replace(string(encodeLedgerV1(t, 7)), `"rows":0`, `"rows":1`, 1)), "checksum"},
		"v1, version 9":   {[]byte(strings.Replace(string(encodeLedgerV1(t, 7)), `"version":1`, `"version":9`, 1)), "version 9"},
	}
	for name, c := range corrupt {
		dir := writeLedgerFile(t, c.file)
		_, err := OpenLedger(dir)
		var se *statefile.Error
		if !errors.As(err, &se) || se.Truncated {
			t.Errorf("%s: %v, want a corrupt *statefile.Error", name, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, filepath.Join(dir, LedgerFile)) || !strings.Contains(msg, "is corrupt") ||
			!strings.Contains(msg, c.says) || !strings.Contains(msg, "remove it to reload every table whose load is not done") {
			t.Errorf("%s: message %q should name the path, %q and the remedy", name, msg, c.says)
		}
	}

	for name, file := range map[string][]byte{
		"empty":        {},
		"white space":  []byte("\n  \n"),
		"half":         good[:len(good)/2],
		"no brace":     good[:len(good)-2],
		"one byte":     good[:1],
		"mid string":   good[:strings.Index(string(good), "walshadow-loads")+4],
		"mid number":   good[:strings.Index(string(good), "1234567")+3],
		"before crc32": good[:strings.Index(string(good), `"crc32c"`)],
	} {
		dir := writeLedgerFile(t, file)
		_, err := OpenLedger(dir)
		var se *statefile.Error
		if !errors.As(err, &se) || !se.Truncated {
			t.Errorf("%s: %v, want a truncated *statefile.Error", name, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, filepath.Join(dir, LedgerFile)) || !strings.Contains(msg, "is truncated") ||
			!strings.Contains(msg, "remove it to reload every table whose load is not done") {
			t.Errorf("%s: message %q should name the path, the truncation and the remedy", name, msg)
		}
	}
}

// encodeLedgerV1 is a one-entry ledger in version 1's form, as the code
// before the envelope wrote it (compact here; it wrote it indented).
func encodeLedgerV1(t testing.TB, oid uint32) []byte {
	t.Helper()
	j := ledgerV1{Format: ledgerSpec.Format, Version: ledgerV1Version, Entries: []entryJSON{{
		Oid: oid, Schema: "s", Table: "t", Mode: "copy", Phase: "done", Coverage: "0/10",
	}}}
	j.CRC = j.checksum()
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLedgerGoldenAndUpgrade: the current file byte for byte
// (testdata/loads_v3.json, -update rewrites it); version 2's file
// (testdata/loads_v2.json, as walshadow before the retry economy wrote
// it) and version 1's (testdata/loads_v1.json, as the code before the
// envelope wrote it) read to the same entries and rewritten as version 3
// by the next change.
func TestLedgerGoldenAndUpgrade(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLedger(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{sampleEntry(16384, "orders"), {Oid: 9, Schema: "s", Table: "t", Mode: ModeBaseBackup, Phase: PhaseDone}}
	for _, e := range want {
		if err := l.Put(e); err != nil {
			t.Fatal(err)
		}
	}
	got := snapshotFile(t, l)

	for _, old := range []string{"loads_v1.json", "loads_v2.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", old))
		if err != nil {
			t.Fatal(err)
		}
		oldDir := writeLedgerFile(t, b)
		lo, err := OpenLedger(oldDir)
		if err != nil {
			t.Fatalf("%s refused: %v", old, err)
		}
		if !reflect.DeepEqual(lo.All(), l.All()) {
			t.Fatalf("%s read as\n%+v\nwant\n%+v", old, lo.All(), l.All())
		}
		if err := lo.Delete(9); err != nil {
			t.Fatal(err)
		}
		if err := lo.Put(want[1]); err != nil {
			t.Fatal(err)
		}
		if again := snapshotFile(t, lo); string(again) != string(got) {
			t.Errorf("a changed %s is not rewritten as version 4:\n%s", old, again)
		}
	}

	// The retry economy's fields.
	if err := l.Put(parkedEntry(16390, "parked")); err != nil {
		t.Fatal(err)
	}
	if err := l.CountReload(ReloadValueRefused); err != nil {
		t.Fatal(err)
	}
	if err := l.CountReload(ReloadValueRefused); err != nil {
		t.Fatal(err)
	}
	if err := l.CountReload(ReloadRequested); err != nil {
		t.Fatal(err)
	}
	reopened, err := OpenLedger(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(reopened.All(), l.All()) || !reflect.DeepEqual(reopened.Reloads(), map[string]int64{ReloadValueRefused: 2, ReloadRequested: 1}) {
		t.Fatalf("reopened from the journal: %+v %v", reopened.All(), reopened.Reloads())
	}
	got = snapshotFile(t, l)
	statefiletest.Golden(t, filepath.Join("testdata", "loads_v4.json"), got, *update)

	// Version 3 (testdata/loads_v3.json, as walshadow wrote it whole on
	// every change) reads to the same state, and its next change rewrites
	// it as version 4.
	b, err := os.ReadFile(filepath.Join("testdata", "loads_v3.json"))
	if err != nil {
		t.Fatal(err)
	}
	v3, err := OpenLedger(writeLedgerFile(t, b))
	if err != nil {
		t.Fatalf("loads_v3.json refused: %v", err)
	}
	if !reflect.DeepEqual(v3.All(), l.All()) || !reflect.DeepEqual(v3.Reloads(), l.Reloads()) {
		t.Fatalf("loads_v3.json read as %+v %v", v3.All(), v3.Reloads())
	}
	if err := v3.Put(v3.All()[0]); err != nil {
		t.Fatal(err)
	}
	if again := readFile(t, v3.path); string(again) != string(got) {
		t.Errorf("a changed loads_v3.json is not rewritten as version 4:\n%s", again)
	}
}

// TestLedgerJournal: after its first change a ledger's changes are
// appended to its journal, never rewriting the file; reopening (and
// ReadLedger, which refuses changes) replays them.
func TestLedgerJournal(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLedger(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Put(sampleEntry(1, "first")); err != nil {
		t.Fatal(err)
	}
	snap := readFile(t, l.path)
	for i := range 50 {
		if err := l.Put(sampleEntry(uint32(i+2), fmt.Sprintf("t%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Delete(1); err != nil {
		t.Fatal(err)
	}
	if err := l.CountReload(ReloadRequested); err != nil {
		t.Fatal(err)
	}
	if now := readFile(t, l.path); string(now) != string(snap) {
		t.Fatal("a change after the first rewrote the whole file")
	}
	for name, open := range map[string]func(string) (*Ledger, error){"OpenLedger": OpenLedger, "ReadLedger": ReadLedger} {
		again, err := open(dir)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(again.All(), l.All()) || !reflect.DeepEqual(again.Reloads(), l.Reloads()) {
			t.Fatalf("%s: %d entries %v, want %d %v", name, len(again.All()), again.Reloads(), len(l.All()), l.Reloads())
		}
	}
	ro, _ := ReadLedger(dir)
	if err := ro.Put(sampleEntry(99, "refused")); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("a change through ReadLedger: %v", err)
	}
}

// snapshotFile compacts l's journal into its file and returns the file.
func snapshotFile(t testing.TB, l *Ledger) []byte {
	t.Helper()
	l.mu.Lock()
	err := l.j.Compact(ledgerBodyOf(l.entries, l.reloads))
	l.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	return readFile(t, l.path)
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLedgerPutLoadKeepsFailures: the engine's record of a load in
// progress (its progress, phase) never undoes a streak or a parking the
// output recorded meanwhile; Update changes one entry in place.
func TestLedgerPutLoadKeepsFailures(t *testing.T) {
	l, err := OpenLedger(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := sampleEntry(7, "t")
	if err := l.Put(e); err != nil {
		t.Fatal(err)
	}
	parked := parkedEntry(7, "t")
	if _, ok, err := l.Update(7, func(x *Entry) bool { x.Streak, x.Parked = parked.Streak, parked.Parked; return true }); !ok || err != nil {
		t.Fatal(ok, err)
	}
	e.Rows = 99 // the load's stale copy, with its progress
	if err := l.putLoad(e); err != nil {
		t.Fatal(err)
	}
	got, _ := l.Get(7)
	if got.Rows != 99 || got.Parked == nil || got.Streak != parked.Streak {
		t.Fatalf("after putLoad: rows %d, parked %v, streak %+v", got.Rows, got.Parked, got.Streak)
	}
	if _, ok, err := l.Update(8, func(*Entry) bool { t.Fatal("called for no entry"); return true }); ok || err != nil {
		t.Fatal(ok, err)
	}
	// fn's changes to a parking reach the ledger only through its write.
	if _, _, err := l.Update(7, func(x *Entry) bool { x.Parked.Count = 9; return false }); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.Get(7); got.Parked.Count != 2 {
		t.Fatalf("an Update that wrote nothing changed the parking: %+v", got.Parked)
	}
}

func TestLedgerAcceptsHandWrittenLSNAndOffsetTimes(t *testing.T) {
	j := ledgerV1{Format: ledgerSpec.Format, Version: ledgerV1Version, Entries: []entryJSON{{
		Oid: 7, Schema: "s", Table: "t", Mode: "copy", Phase: "done", Coverage: "a/1f",
		StartedAt: "2026-11-30T15:02:03.25+01:00", FinishedAt: "2026-11-30T14:10:00Z",
	}}}
	j.CRC = j.checksum()
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	l, err := OpenLedger(writeLedgerFile(t, b))
	if err != nil {
		t.Fatal(err)
	}
	e, _ := l.Get(7)
	if e.Coverage != wal.LSN(0xA_0000_001F) || !e.StartedAt.Equal(time.Date(2026, 11, 30, 14, 2, 3, 250_000_000, time.UTC)) || e.StartedAt.Location() != time.UTC {
		t.Fatalf("decoded %+v", e)
	}
}
