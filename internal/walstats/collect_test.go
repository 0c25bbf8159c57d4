package walstats

import (
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

// fakeReader replays records and errors; after the list it returns io.EOF.
type fakeReader struct {
	items []fakeItem
	next  int
}

type fakeItem struct {
	rec *wal.Record
	err error
}

func (f *fakeReader) Next() (*wal.Record, error) {
	if f.next == len(f.items) {
		return nil, io.EOF
	}
	it := f.items[f.next]
	f.next++
	return it.rec, it.err
}

func layout(t testing.TB, major int) *wal.Layout {
	t.Helper()
	l, err := wal.LayoutForMajor(major)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// fakeRecord builds a record at lsn of totLen bytes whose blocks carry
// images of the given stored lengths.
func fakeRecord(l *wal.Layout, lsn wal.LSN, rmid wal.RmgrID, info uint8, totLen uint32, images ...uint16) *wal.Record {
	rec := &wal.Record{
		LSN:    lsn,
		End:    lsn + wal.LSN(totLen),
		Next:   wal.MaxAlign(lsn + wal.LSN(totLen)),
		Header: wal.RecordHeader{TotLen: totLen, RmID: rmid, Info: info},
		Layout: l,
	}
	// A block without an image in between must not count.
	rec.Blocks = append(rec.Blocks, wal.BlockRef{ID: 0, ForkFlags: wal.BkpBlockHasData})
	for i, n := range images {
		rec.Blocks = append(rec.Blocks, wal.BlockRef{
			ID:        uint8(i + 1),
			ForkFlags: wal.BkpBlockHasImage,
			Image:     wal.BlockImage{Length: n},
		})
	}
	return rec
}

func recs(rs ...*wal.Record) []fakeItem {
	out := make([]fakeItem, len(rs))
	for i, r := range rs {
		out[i] = fakeItem{rec: r}
	}
	return out
}

func TestCollectRecordsAggregates(t *testing.T) {
	l := layout(t, 15)
	items := recs(
		fakeRecord(l, 0x1000028, wal.RmgrHeap, 0x00, 100),              // Heap/INSERT
		fakeRecord(l, 0x1000090, wal.RmgrHeap, 0x80, 8300, 8192),       // Heap/INSERT+INIT with a full image
		fakeRecord(l, 0x1002100, wal.RmgrHeap, 0x01, 60),               // Heap/INSERT, generic bit set
		fakeRecord(l, 0x1002140, wal.RmgrXact, 0x80, 40),               // Transaction/COMMIT with HAS_INFO
		fakeRecord(l, 0x1002170, wal.RmgrXact, 0x00, 34),               // Transaction/COMMIT
		fakeRecord(l, 0x10021A0, wal.RmgrXLOG, 0xB0, 3000, 1000, 1500), // XLOG/FPI, two images
		fakeRecord(l, 0x1002D60, 200, 0x30, 50),                        // custom rmgr
	)
	rep, err := CollectRecords(context.Background(), &fakeReader{items: items}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Records != 7 || rep.TotalBytes != 100+8300+60+40+34+3000+50 {
		t.Errorf("records %d total bytes %d", rep.Records, rep.TotalBytes)
	}
	if rep.FPICount != 3 || rep.FPIBytes != 8192+1000+1500 {
		t.Errorf("fpi count %d bytes %d", rep.FPICount, rep.FPIBytes)
	}
	if rep.RecordBytes+rep.FPIBytes != rep.TotalBytes {
		t.Errorf("record bytes %d + fpi bytes %d != total %d", rep.RecordBytes, rep.FPIBytes, rep.TotalBytes)
	}
	if rep.StartLSN != 0x1000028 || rep.EndLSN != 0x1002D60+50 {
		t.Errorf("range %s..%s", rep.StartLSN, rep.EndLSN)
	}
	if rep.Stop.Reason != StopEndOfInput || rep.Stop.LSN != rep.EndLSN {
		t.Errorf("stop %+v", rep.Stop)
	}
	if rep.PGMajor != 15 {
		t.Errorf("pg major %d", rep.PGMajor)
	}
	wantRmgrs := []RmgrStats{
		{ID: 0, Name: "XLOG", Stats: Stats{Count: 1, RecordBytes: 500, FPICount: 2, FPIBytes: 2500, CombinedBytes: 3000}},
		{ID: 1, Name: "Transaction", Stats: Stats{Count: 2, RecordBytes: 74, CombinedBytes: 74}},
		{ID: 10, Name: "Heap", Stats: Stats{Count: 3, RecordBytes: 100 + 108 + 60, FPICount: 1, FPIBytes: 8192, CombinedBytes: 8460}},
		{ID: 200, Name: "custom200", Stats: Stats{Count: 1, RecordBytes: 50, CombinedBytes: 50}},
	}
	if !reflect.DeepEqual(rep.Rmgrs, wantRmgrs) {
		t.Errorf("rmgrs\n got %+v\nwant %+v", rep.Rmgrs, wantRmgrs)
	}
	wantTypes := []RecordTypeStats{
		{RmgrID: 0, Rmgr: "XLOG", Info: 0xB0, Type: "FPI", Name: "XLOG/FPI", Stats: Stats{Count: 1, RecordBytes: 500, FPICount: 2, FPIBytes: 2500, CombinedBytes: 3000}},
		{RmgrID: 1, Rmgr: "Transaction", Info: 0x00, Type: "COMMIT", Name: "Transaction/COMMIT", Stats: Stats{Count: 2, RecordBytes: 74, CombinedBytes: 74}},
		{RmgrID: 10, Rmgr: "Heap", Info: 0x00, Type: "INSERT", Name: "Heap/INSERT", Stats: Stats{Count: 2, RecordBytes: 160, CombinedBytes: 160}},
		{RmgrID: 10, Rmgr: "Heap", Info: 0x80, Type: "INSERT+INIT", Name: "Heap/INSERT+INIT", Stats: Stats{Count: 1, RecordBytes: 108, FPICount: 1, FPIBytes: 8192, CombinedBytes: 8300}},
		{RmgrID: 200, Rmgr: "custom200", Info: 0x30, Type: "UNKNOWN (30)", Name: "custom200/UNKNOWN (30)", Stats: Stats{Count: 1, RecordBytes: 50, CombinedBytes: 50}},
	}
	if !reflect.DeepEqual(rep.RecordTypes, wantTypes) {
		t.Errorf("record types\n got %+v\nwant %+v", rep.RecordTypes, wantTypes)
	}
}

func TestCollectRecordsUsesLayoutNames(t *testing.T) {
	l := layout(t, 17)
	items := recs(fakeRecord(l, 0x28, wal.RmgrHeap2, 0x10, 30), fakeRecord(l, 0x48, wal.RmgrXLOG, 0xE0, 28))
	rep, err := CollectRecords(context.Background(), &fakeReader{items: items}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, rt := range rep.RecordTypes {
		names = append(names, rt.Name)
	}
	if got, want := strings.Join(names, ","), "XLOG/CHECKPOINT_REDO,Heap2/PRUNE_ON_ACCESS"; got != want {
		t.Errorf("names %s, want %s", got, want)
	}
}

func TestCollectRecordsCountsCRCFailuresAndContinues(t *testing.T) {
	l := layout(t, 15)
	items := []fakeItem{
		{rec: fakeRecord(l, 0x100, wal.RmgrHeap, 0x00, 50)},
		{err: &wal.Error{LSN: 0x138, Kind: wal.KindCRC, Msg: "incorrect resource manager data checksum"}},
		{rec: fakeRecord(l, 0x170, wal.RmgrHeap, 0x10, 50)},
		{err: &wal.Error{LSN: 0x1A8, Kind: wal.KindCRC, Msg: "incorrect resource manager data checksum"}},
		{rec: fakeRecord(l, 0x1E0, wal.RmgrHeap, 0x20, 50)},
		{err: &wal.Error{LSN: 0x218, Kind: wal.KindEndOfWAL, Msg: "invalid record length: wanted 24, got 0"}},
		{rec: fakeRecord(l, 0x300, wal.RmgrHeap, 0x20, 50)}, // never read
	}
	rep, err := CollectRecords(context.Background(), &fakeReader{items: items}, Options{})
	if err != nil {
		t.Fatalf("end of WAL must not be an error: %v", err)
	}
	if rep.Records != 3 || rep.CRCFailures != 2 {
		t.Errorf("records %d crc failures %d, want 3 and 2", rep.Records, rep.CRCFailures)
	}
	if !reflect.DeepEqual(rep.CRCFailureLSNs, []LSN{0x138, 0x1A8}) {
		t.Errorf("crc failure lsns %v", rep.CRCFailureLSNs)
	}
	want := Stop{Reason: StopEndOfWAL, LSN: 0x218, Message: "invalid record length: wanted 24, got 0"}
	if rep.Stop != want {
		t.Errorf("stop %+v, want %+v", rep.Stop, want)
	}
	if rep.EndLSN != 0x1E0+50 {
		t.Errorf("end lsn %s", rep.EndLSN)
	}
}

func TestCollectRecordsCapsCRCFailureList(t *testing.T) {
	var items []fakeItem
	for i := 0; i < MaxCRCFailureLSNs+5; i++ {
		items = append(items, fakeItem{err: &wal.Error{LSN: wal.LSN(i * 64), Kind: wal.KindCRC}})
	}
	rep, err := CollectRecords(context.Background(), &fakeReader{items: items}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.CRCFailures != MaxCRCFailureLSNs+5 || len(rep.CRCFailureLSNs) != MaxCRCFailureLSNs {
		t.Errorf("crc failures %d, listed %d", rep.CRCFailures, len(rep.CRCFailureLSNs))
	}
}

func TestCollectRecordsFatalErrors(t *testing.T) {
	l := layout(t, 15)
	corrupt := &wal.Error{LSN: 0x2000, Kind: wal.KindCorrupt, Msg: "record with incorrect prev-link"}
	items := []fakeItem{{rec: fakeRecord(l, 0x1000, wal.RmgrHeap, 0, 40)}, {err: corrupt}}
	rep, err := CollectRecords(context.Background(), &fakeReader{items: items}, Options{})
	if err != corrupt {
		t.Fatalf("err = %v, want the reader's *wal.Error", err)
	}
	if rep == nil || rep.Records != 1 || rep.Stop.Reason != StopError || rep.Stop.LSN != 0x2000 ||
		!strings.Contains(rep.Stop.Message, "prev-link") {
		t.Fatalf("partial report %+v", rep)
	}

	plain := errors.New("segment missing")
	items = []fakeItem{{rec: fakeRecord(l, 0x1000, wal.RmgrHeap, 0, 40)}, {err: plain}}
	rep, err = CollectRecords(context.Background(), &fakeReader{items: items}, Options{})
	if !errors.Is(err, plain) || !strings.Contains(err.Error(), "0/00001028") {
		t.Fatalf("err = %v, want it wrapped with the position 0/00001028", err)
	}
	if rep.Stop.Reason != StopError || rep.Stop.LSN != 0x1028 {
		t.Fatalf("stop %+v", rep.Stop)
	}
}

func TestCollectRecordsStartEnd(t *testing.T) {
	l := layout(t, 15)
	items := recs(
		fakeRecord(l, 0x100, wal.RmgrHeap, 0x00, 40),
		fakeRecord(l, 0x200, wal.RmgrHeap, 0x10, 40),
		fakeRecord(l, 0x300, wal.RmgrHeap, 0x20, 40),
		fakeRecord(l, 0x400, wal.RmgrHeap, 0x40, 40),
	)
	rep, err := CollectRecords(context.Background(), &fakeReader{items: items}, Options{StartLSN: 0x200, EndLSN: 0x400})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Records != 2 || rep.StartLSN != 0x200 || rep.EndLSN != 0x328 {
		t.Errorf("records %d range %s..%s", rep.Records, rep.StartLSN, rep.EndLSN)
	}
	if rep.Stop != (Stop{Reason: StopEndLSN, LSN: 0x328}) {
		t.Errorf("stop %+v", rep.Stop)
	}
}

// endless returns the same record forever.
type endless struct{ rec *wal.Record }

func (e endless) Next() (*wal.Record, error) { return e.rec, nil }

func TestCollectRecordsCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := CollectRecords(ctx, endless{fakeRecord(layout(t, 15), 0x28, wal.RmgrHeap, 0, 40)}, Options{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if rep.Stop.Reason != StopCanceled || rep.Records == 0 || rep.Records >= 2*cancelCheckInterval {
		t.Fatalf("records %d stop %+v", rep.Records, rep.Stop)
	}
}

// countingReader yields n copies of one record.
type countingReader struct {
	rec *wal.Record
	n   int
}

func (c *countingReader) Next() (*wal.Record, error) {
	if c.n == 0 {
		return nil, io.EOF
	}
	c.n--
	return c.rec, nil
}

// TestCollectRecordsAllocationsDoNotGrowWithRecords checks the hot loop:
// a run over 100x more records must allocate as much (give or take the one
// allocation the runtime itself sometimes makes during a run: a growth per
// record would show as thousands).
func TestCollectRecordsAllocationsDoNotGrowWithRecords(t *testing.T) {
	rec := fakeRecord(layout(t, 15), 0x28, wal.RmgrHeap, 0x40, 200, 100)
	allocs := func(n int) float64 {
		return testing.AllocsPerRun(5, func() {
			if _, err := CollectRecords(context.Background(), &countingReader{rec: rec, n: n}, Options{}); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(1000), allocs(100000)
	if large > small+1 {
		t.Fatalf("allocations grow with records: %v for 1000, %v for 100000", small, large)
	}
}

func TestLSNText(t *testing.T) {
	b, err := LSN(0x1_016B3748).MarshalText()
	if err != nil || string(b) != "1/016B3748" {
		t.Fatalf("MarshalText = %q, %v", b, err)
	}
	var l LSN
	if err := l.UnmarshalText([]byte("1/016B3748")); err != nil || l != 0x1_016B3748 {
		t.Fatalf("UnmarshalText = %s, %v", l, err)
	}
	if err := l.UnmarshalText([]byte("nope")); err == nil {
		t.Fatal("UnmarshalText accepted garbage")
	}
}
