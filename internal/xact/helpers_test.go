package xact

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

// rawFor makes a record body that identifies its LSN and xid, n bytes long
// (at least the identifying prefix).
func rawFor(lsn wal.LSN, xid uint32, n int) []byte {
	b := fmt.Appendf(nil, "lsn=%d xid=%d;", lsn, xid)
	for i := 0; len(b) < n; i++ {
		b = append(b, byte(uint64(lsn)*31+uint64(i)*7+uint64(xid)))
	}
	return b
}

func change(lsn wal.LSN, xid uint32, n int) Change {
	return Change{LSN: lsn, Next: lsn + wal.LSN(n), XID: xid, Flags: uint8(lsn % 2), Raw: rawFor(lsn, xid, n)}
}

func newTestBuffer(t testing.TB, cfg Config) *Buffer {
	t.Helper()
	if cfg.SpillDir == "" {
		cfg.SpillDir = t.TempDir()
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// drainAll reads every slice, checking the slice limits, and returns deep
// copies of the records.
func drainAll(t testing.TB, b *Buffer, d *Drain) []Change {
	t.Helper()
	var got []Change
	for {
		slice, err := d.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if len(slice) == 0 {
			t.Fatalf("Next returned an empty slice")
		}
		n := 0
		for _, c := range slice {
			n += len(c.Raw)
		}
		if len(slice) > b.cfg.SliceRecords {
			t.Fatalf("slice of %d records exceeds %d", len(slice), b.cfg.SliceRecords)
		}
		if len(slice) > 1 && n > b.cfg.SliceBytes {
			t.Fatalf("slice of %d bytes exceeds %d", n, b.cfg.SliceBytes)
		}
		for _, c := range slice {
			c.Raw = bytes.Clone(c.Raw)
			got = append(got, c)
		}
	}
	if len(got) != d.Len() {
		t.Fatalf("drained %d records, Len says %d", len(got), d.Len())
	}
	if len(got) > 0 && got[0].LSN != d.FirstLSN() {
		t.Fatalf("first drained LSN %s, FirstLSN says %s", got[0].LSN, d.FirstLSN())
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return got
}

func sameChanges(t testing.TB, got, want []Change) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records %v, want %d %v", len(got), lsnsOf(got), len(want), lsnsOf(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.LSN != w.LSN || g.Next != w.Next || g.XID != w.XID || g.Flags != w.Flags || !bytes.Equal(g.Raw, w.Raw) {
			t.Fatalf("record %d: got {%s %s xid %d flags %d %d bytes}, want {%s %s xid %d flags %d %d bytes}",
				i, g.LSN, g.Next, g.XID, g.Flags, len(g.Raw), w.LSN, w.Next, w.XID, w.Flags, len(w.Raw))
		}
	}
}

func lsnsOf(cs []Change) []wal.LSN {
	out := make([]wal.LSN, len(cs))
	for i, c := range cs {
		out[i] = c.LSN
	}
	return out
}

func spillFilesIn(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.spill"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustNoSpillFiles(t testing.TB, dir string) {
	t.Helper()
	if m := spillFilesIn(t, dir); len(m) != 0 {
		t.Fatalf("spill files left: %v", m)
	}
}

func fileSize(t testing.TB, p string) int64 {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}
