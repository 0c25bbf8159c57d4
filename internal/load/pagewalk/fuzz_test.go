package pagewalk

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/decode"
)

// goldenPages returns a few pages of the captured main relation file.
func goldenPages(f *testing.F) [][]byte {
	g, archives := loadGolden(f)
	main := relPath(g.DbOid, g.Target.Desc.Rfn.RelNum)
	tr := tar.NewReader(bytes.NewReader(archives["unhinted"]))
	for {
		hdr, err := tr.Next()
		if err != nil {
			f.Fatal(err)
		}
		if hdr.Name == main {
			data, _ := io.ReadAll(tr)
			var pages [][]byte
			for b := 0; b+BlockSize <= len(data) && len(pages) < 4; b += BlockSize {
				pages = append(pages, data[b:b+BlockSize])
			}
			return pages
		}
	}
}

// FuzzPage feeds arbitrary bytes (padded to a page) through page parsing,
// tuple splitting, the gate and row decoding: nothing panics, and every
// page or item error names the file and block (and item).
func FuzzPage(f *testing.F) {
	g, _ := loadGolden(f)
	for _, p := range goldenPages(f) {
		f.Add(p)
	}
	f.Add(make([]byte, BlockSize))
	f.Fuzz(func(t *testing.T, in []byte) {
		page := make([]byte, BlockSize)
		copy(page, in)
		p, isNew, err := ParsePage(page, "base/5/1", 7)
		if err != nil {
			var pe *PageError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), "base/5/1 block 7") {
				t.Fatalf("error does not name the page: %v", err)
			}
			return
		}
		if isNew {
			return
		}
		_ = p.VerifyChecksum("base/5/1", 7)
		rows := decode.NewPageRows(decode.TxOptions{MaxValueBytes: 1 << 16})
		for i := 1; i <= p.NumItems(); i++ {
			raw, ok, err := p.Tuple(i, "base/5/1", 7)
			if err != nil {
				if !strings.Contains(err.Error(), "base/5/1 block 7 item ") {
					t.Fatalf("error does not name the item: %v", err)
				}
				continue
			}
			if !ok {
				continue
			}
			h, tup, err := decode.PageTuple(raw)
			if err != nil {
				continue
			}
			_, _ = Visible(h, fakeSource{})
			_, _, _ = rows.Row(g.Target.Desc, 0, tup, 1)
			_ = rows.AddToastChunk(g.Target.Toast, tup)
		}
	})
}

// FuzzClog reads statuses and multixacts from arbitrary SLRU pages: no
// panics; a page after the newest is in progress, one below it an error.
func FuzzClog(f *testing.F) {
	f.Add(make([]byte, BlockSize), uint32(5), uint32(1))
	f.Add(bytes.Repeat([]byte{0x55}, BlockSize), uint32(40000), uint32(3))
	f.Fuzz(func(t *testing.T, page []byte, xid, multi uint32) {
		c := NewClog()
		m := NewMultixacts()
		seg := make([]byte, BlockSize)
		copy(seg, page)
		if err := c.AddSegment("0000", seg); err != nil {
			t.Fatal(err)
		}
		_ = m.AddOffsets("0000", seg)
		_ = m.AddMembers("0000", seg)
		st, err := c.Status(xid)
		if xid < BlockSize*clogXactsPerByte && (err != nil || st > XidSubCommitted) {
			t.Fatalf("xid %d on the page: %v %v", xid, st, err)
		}
		// Past the page: a later page (in progress) up to half the xid
		// space ahead, else a page below the held one (an error).
		xidPage := xid / (BlockSize * clogXactsPerByte)
		if xidPage > 0 && xidPage <= clogPages/2 && (err != nil || st != XidInProgress) {
			t.Fatalf("xid %d after the newest page: %v %v, want in progress", xid, st, err)
		}
		if xidPage > clogPages/2 && err == nil {
			t.Fatalf("xid %d below the held page (modulo 2^32): no error", xid)
		}
		members, err := m.Members(multi)
		if err == nil && len(members) == 0 {
			t.Fatalf("multi %d: no members and no error", multi)
		}
		_, _, _ = m.Updater(multi)
	})
}

// BenchmarkWalk walks the captured backup (pages, gate, pg_xact, decoding).
func BenchmarkWalk(b *testing.B) {
	g, archives := loadGolden(b)
	arc := archives["hinted"]
	var relBytes int64
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_, st, err := walkAll(b, arc, g.DbOid, g.Target, 1, Config{})
		if err != nil {
			b.Fatal(err)
		}
		relBytes = st.Bytes
	}
	b.SetBytes(relBytes)
}
