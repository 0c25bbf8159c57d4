package decode

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/pierrec/lz4/v4"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/wal"
)

// chunkFeeder feeds a stored value as TOAST chunks through one reused
// record whose seq and data bytes are patched in place (Add allows reusing
// a record once it returns), so measuring Add's allocations does not count
// building tens of thousands of test records.
type chunkFeeder struct {
	full, last *wal.Record
	// seq and data offsets of the patched fields in each record's Raw
	fullSeq, fullData int
	lastSeq, lastData int
}

const testChunkSize = 1996 // TOAST_MAX_CHUNK_SIZE on 8 kB pages

func newChunkFeeder(t testing.TB, id uint32, size int) *chunkFeeder {
	t.Helper()
	f := &chunkFeeder{}
	locate := func(n int) (*wal.Record, int, int) {
		marker := make([]byte, n)
		for i := range marker {
			marker[i] = byte(i*7 + 3) // unlikely elsewhere in the record
		}
		tup := tupleOf(toastDesc(), [][]byte{le32(id), int4(0), plain(marker)})
		rec := insertRecord(t, 0x1000, toastRfn, 1, wal.XLHInsertOnToastRelation, tup)
		off := bytes.Index(rec.Raw, marker)
		if off < 0 || bytes.Index(rec.Raw[off+1:], marker) >= 0 {
			t.Fatalf("chunk data not found exactly once in the test record")
		}
		return rec, off - 4 - 4, off // chunk_seq int4, then the 4-byte varlena header
	}
	f.full, f.fullSeq, f.fullData = locate(min(testChunkSize, size))
	if rest := size % testChunkSize; rest != 0 && size > testChunkSize {
		f.last, f.lastSeq, f.lastData = locate(rest)
	}
	return f
}

// feed adds stored as chunks, starting at *lsn.
func (f *chunkFeeder) feed(t testing.TB, tx *Tx, lsn *wal.LSN, stored []byte) {
	t.Helper()
	for seq := 0; len(stored) > 0; seq++ {
		rec, seqOff, dataOff := f.full, f.fullSeq, f.fullData
		if len(stored) < testChunkSize && f.last != nil {
			rec, seqOff, dataOff = f.last, f.lastSeq, f.lastData
		}
		n := copy(rec.Raw[dataOff:], stored[:min(testChunkSize, len(stored))])
		binary.LittleEndian.PutUint32(rec.Raw[seqOff:], uint32(seq))
		rec.LSN = *lsn
		if _, err := tx.Add(nil, rec, false); err != nil {
			t.Fatal(err)
		}
		stored = stored[n:]
		*lsn += 0x800
	}
}

// lz4Stored is value as PostgreSQL stores an lz4-compressed external value:
// va_tcinfo (raw size, method) then the compressed block.
func lz4Stored(t testing.TB, value []byte) []byte {
	t.Helper()
	comp := make([]byte, lz4.CompressBlockBound(len(value)))
	n, err := lz4.CompressBlock(value, comp, nil)
	if err != nil || n == 0 {
		t.Fatal(n, err)
	}
	stored := binary.LittleEndian.AppendUint32(nil, uint32(len(value))|uint32(CompressionLZ4)<<30)
	return append(stored, comp[:n]...)
}

// toastAllocs decodes one row whose text column is stored (chunked) and
// returns the bytes Add allocated for it and the decoded value.
func toastAllocs(t *testing.T, value, stored []byte, method CompressionMethod) (uint64, string) {
	t.Helper()
	tx, _ := newTestTx(TxOptions{}, mainDesc(), toastDesc())
	feeder := newChunkFeeder(t, 4242, len(stored))
	ptr := externalPointer(int32(len(value)+4), len(stored), method, 4242, 20001)
	lsn := wal.LSN(0x1000)
	mainRec := insertRecord(t, 0x7000_0000-0x100, mainRfn, 1, 0, itemTuple(1, ptr, 1))

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	feeder.feed(t, tx, &lsn, stored)
	rows, err := tx.Add(nil, mainRec, false)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := rows[0].Fields[1].Value.(string)
	if !ok {
		t.Fatalf("value is %T", rows[0].Fields[1].Value)
	}
	// What stays reachable with the row alive: the value, not its chunks.
	var live runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&live)
	retained := int64(live.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("retained with the row: %.1f MiB", float64(retained)/(1<<20))
	if retained > int64(len(value))*5/4 {
		t.Errorf("%d bytes stay reachable for a %d-byte value", retained, len(value))
	}
	runtime.KeepAlive(tx)
	runtime.KeepAlive(stored) // the caller's: its death would offset the measure
	return after.TotalAlloc - before.TotalAlloc, got
}

// TestTxToastAllocBound: reassembling a 64 MiB value allocates about its
// size (chunk storage plus the one assembled value), not a multiple.
func TestTxToastAllocBound(t *testing.T) {
	if testing.Short() {
		t.Skip("64 MiB value in -short mode")
	}
	const size = 64 << 20
	value := bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstuvwxyz"), size/36+1)[:size]

	alloc, got := toastAllocs(t, value, value, CompressionPGLZ)
	if got != string(value) {
		t.Fatalf("reassembled value differs (%d bytes)", len(got))
	}
	t.Logf("uncompressed %d MiB value: %.1f MiB allocated (%.2fx)", size>>20, float64(alloc)/(1<<20), float64(alloc)/size)
	if limit := uint64(size) * 5 / 2; alloc > limit {
		t.Errorf("reassembling a %d-byte value allocated %d bytes, more than %d", size, alloc, limit)
	}

	// Compressed: half random bytes so the stored form is about half the value.
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < size; i += 64 {
		for j := i; j < i+32 && j < size; j++ {
			value[j] = byte(rng.Uint32())
		}
	}
	stored := lz4Stored(t, value)
	alloc, got = toastAllocs(t, value, stored, CompressionLZ4)
	if got != string(value) {
		t.Fatalf("inflated value differs (%d bytes)", len(got))
	}
	t.Logf("lz4 %d MiB value stored in %.1f MiB: %.1f MiB allocated (%.2fx the value)",
		size>>20, float64(len(stored))/(1<<20), float64(alloc)/(1<<20), float64(alloc)/size)
	if limit := uint64(size)*5/2 + uint64(len(stored)); alloc > limit {
		t.Errorf("inflating a %d-byte value allocated %d bytes, more than %d", size, alloc, limit)
	}
}

// addChunksOf feeds data as chunks of value id, chunk bytes each (the last
// one shorter).
func addChunksOf(t *testing.T, tx *Tx, lsn *wal.LSN, id uint32, data []byte, chunk int) {
	t.Helper()
	td := toastDesc()
	for seq := 0; len(data) > 0; seq++ {
		n := min(chunk, len(data))
		tup := tupleOf(td, [][]byte{le32(id), int4(int32(seq)), plain(data[:n])})
		mustAdd(t, tx, nil, insertRecord(t, *lsn, toastRfn, 1, wal.XLHInsertOnToastRelation, tup))
		data = data[n:]
		*lsn += 0x800
	}
}

// pglzRepeat is a pglz stream for value, whose first period bytes repeat
// (as PostgreSQL's pglz_compress would emit it: period literals, then
// back-references of up to 273 bytes at offset period).
func pglzRepeat(value []byte, period int) []byte {
	var out []byte
	ctrlAt, bit := -1, 8
	emit := func(match bool, b ...byte) {
		if bit == 8 {
			out = append(out, 0)
			ctrlAt, bit = len(out)-1, 0
		}
		if match {
			out[ctrlAt] |= 1 << bit
		}
		bit++
		out = append(out, b...)
	}
	for i := 0; i < period && i < len(value); i++ {
		emit(false, value[i])
	}
	for i := period; i < len(value); {
		n := min(273, len(value)-i)
		switch {
		case n < 3:
			emit(false, value[i])
			n = 1
		case n > 17:
			emit(true, byte(period>>4&0xf0|0x0f), byte(period), byte(n-18))
		default:
			emit(true, byte(period>>4&0xf0|(n-3)), byte(period))
		}
		i += n
	}
	return out
}

func pglzStored(value []byte, period int) []byte {
	return append(binary.LittleEndian.AppendUint32(nil, uint32(len(value))|uint32(CompressionPGLZ)<<30), pglzRepeat(value, period)...)
}

// TestTxToastReassembly covers the chunk store's shapes: values in the
// first segment (assembled in place), copied once from several segments,
// chunks straddling segment boundaries, compressed ones inflated from the
// assembled chunks. Each value must come out in a buffer the Tx owns, with
// the Value aliasing it (no further copy) and the chunks released.
func TestTxToastReassembly(t *testing.T) {
	pattern := func(n int) []byte {
		return bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstuvwxyz"), n/36+1)[:n]
	}
	cases := []struct {
		name    string
		size    int
		chunk   int
		method  int // -1 uncompressed
		inPlace bool
		bytea   bool
	}{
		{"one chunk", 1500, 1996, -1, true, false},
		{"two chunks", 3000, 1996, -1, false, false},
		{"one chunk bytea", 1996, 1996, -1, true, true},
		{"three chunks", 5000, 1996, -1, false, false},
		{"chunks straddle segments", 5<<20 + 3, 7000, -1, false, false},
		{"large chunks", 3 << 20, 60000, -1, false, true},
		{"pglz one chunk", 40000, 1996, int(CompressionPGLZ), false, false},
		{"pglz many chunks", 3 << 20, 1996, int(CompressionPGLZ), false, false},
		{"lz4 many chunks", 3 << 20, 1996, int(CompressionLZ4), false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			desc := mainDesc()
			if c.bytea {
				desc.Columns[1].TypeOid = OidBytea
			}
			value := pattern(c.size)
			stored, method := value, CompressionPGLZ
			switch c.method {
			case int(CompressionPGLZ):
				stored = pglzStored(value, 36)
			case int(CompressionLZ4):
				stored, method = lz4Stored(t, value), CompressionLZ4
			}
			tx, _ := newTestTx(TxOptions{}, desc, toastDesc())
			lsn := wal.LSN(0x1000)
			addChunksOf(t, tx, &lsn, 4242, stored, c.chunk)
			first := tx.toast[toastKey{20001, 4242}].segs[0]
			ptr := externalPointer(int32(len(value)+4), len(stored), method, 4242, 20001)
			// Not the last of its multi-insert: the chunks stay collected, so
			// the test can see what the value left behind.
			rows := mustAdd(t, tx, nil, multiInsertRecord(t, lsn, mainRfn, 0,
				[][]byte{tupleOf(desc, [][]byte{int4(1), ptr, int8v(1)})}))
			tv := tx.toast[toastKey{20001, 4242}]
			if tv == nil || tv.segs != nil || len(tv.expanded) != 4+len(value) || cap(tv.expanded) != len(tv.expanded) {
				t.Fatalf("after use: %+v", tv)
			}
			if got := binary.LittleEndian.Uint32(tv.expanded) >> 2; int(got) != 4+len(value) {
				t.Errorf("varlena header says %d bytes", got)
			}
			var data unsafe.Pointer
			switch v := rows[0].Fields[1].Value.(type) {
			case string:
				if v != string(value) {
					t.Fatalf("value differs (%d bytes)", len(v))
				}
				data = unsafe.Pointer(unsafe.StringData(v))
			case []byte:
				if !bytes.Equal(v, value) {
					t.Fatalf("value differs (%d bytes)", len(v))
				}
				data = unsafe.Pointer(unsafe.SliceData(v))
			default:
				t.Fatalf("value is %T", v)
			}
			if data != unsafe.Pointer(&tv.expanded[4]) {
				t.Error("the Value is a copy of the reassembled buffer")
			}
			// A one-chunk value is its first segment (header room reserved);
			// the others are copied once, into a buffer of exactly their size.
			if inPlace := &tv.expanded[0] == &first[0]; inPlace != c.inPlace {
				t.Errorf("assembled in place: %v, want %v", inPlace, c.inPlace)
			}
			if s := tx.Stats(); s.ToastValues != 1 || s.ToastChunks != int64((len(stored)+c.chunk-1)/c.chunk) {
				t.Errorf("stats %+v", s)
			}
			if _, err := tx.Finish(nil); err != nil {
				t.Fatal(err)
			}
			if s := tx.Stats(); s.ToastChunksUnused != 0 {
				t.Errorf("chunks of a used value counted unused: %+v", s)
			}
		})
	}
}

// twoTextDesc is mainDesc with a second text column.
func twoTextDesc() *desclog.Descriptor {
	d := mainDesc()
	d.Columns = append(d.Columns, desclog.Column{Num: 4, Name: "body2", TypeOid: OidText, Len: -1, Align: 'i', TypeKind: 'b'})
	return d
}

func TestTxToastReferencedTwice(t *testing.T) {
	value := bytes.Repeat([]byte("v"), 5000)
	ptr := externalPointer(5004, 5000, 0, 7, 20001)
	t.Run("same pointer", func(t *testing.T) {
		desc := twoTextDesc()
		tx, _ := newTestTx(TxOptions{}, desc, toastDesc())
		lsn := wal.LSN(0x1000)
		addChunksOf(t, tx, &lsn, 7, value, 1996)
		rows := mustAdd(t, tx, nil, insertRecord(t, lsn, mainRfn, 1, 0, tupleOf(desc, [][]byte{int4(1), ptr, int8v(1), ptr})))
		if rows[0].Fields[1].Value != string(value) || rows[0].Fields[3].Value != string(value) {
			t.Fatalf("fields %+v", rows[0].Fields)
		}
		if s := tx.Stats(); s.ToastValues != 1 || s.ToastChunksUnused != 0 {
			t.Errorf("stats %+v", s)
		}
	})
	t.Run("different pointer", func(t *testing.T) {
		desc := twoTextDesc()
		tx, _ := newTestTx(TxOptions{}, desc, toastDesc())
		lsn := wal.LSN(0x1000)
		addChunksOf(t, tx, &lsn, 7, value, 1996)
		other := externalPointer(6004, 5000, 0, 7, 20001) // compressed, per its sizes
		err := mustFail(t, tx, insertRecord(t, lsn, mainRfn, 1, 0, tupleOf(desc, [][]byte{int4(1), ptr, int8v(1), other}))).Err
		if err == nil || !strings.Contains(err.Error(), "referenced again with a different pointer") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("chunk after use", func(t *testing.T) {
		tx, _ := newTestTx(TxOptions{}, mainDesc(), toastDesc())
		lsn := wal.LSN(0x1000)
		addChunksOf(t, tx, &lsn, 7, value, 1996)
		mustAdd(t, tx, nil, multiInsertRecord(t, lsn, mainRfn, 0, [][]byte{itemTuple(1, ptr, 1)}))
		lsn += 0x100
		tup := tupleOf(toastDesc(), [][]byte{le32(7), int4(3), plain([]byte("late"))})
		mustAdd(t, tx, nil, insertRecord(t, lsn, toastRfn, 1, wal.XLHInsertOnToastRelation, tup))
		err := mustFail(t, tx, multiInsertRecord(t, lsn+0x100, mainRfn, wal.XLHInsertLastInMulti, [][]byte{itemTuple(2, ptr, 1)})).Err
		if err == nil || !strings.Contains(err.Error(), "arrives after a row used the value") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("corrupt compressed value", func(t *testing.T) {
		desc := twoTextDesc()
		tx, _ := newTestTx(TxOptions{}, desc, toastDesc())
		lsn := wal.LSN(0x1000)
		bad := append(binary.LittleEndian.AppendUint32(nil, 9000|uint32(CompressionLZ4)<<30), bytes.Repeat([]byte{0xff}, 4996)...)
		addChunksOf(t, tx, &lsn, 7, bad, 1996)
		cptr := externalPointer(9004, 5000, CompressionLZ4, 7, 20001)
		err := mustFail(t, tx, insertRecord(t, lsn, mainRfn, 1, 0, tupleOf(desc, [][]byte{int4(1), cptr, int8v(1), cptr}))).Err
		if err == nil || !strings.Contains(err.Error(), "TOAST value 7 of relation 20001: lz4") {
			t.Fatalf("error %v", err)
		}
	})
}

// TestToastValueAssemble checks the chunk store alone: any split of the
// bytes into chunks assembles to the same bytes, behind 4 bytes of room.
func TestToastValueAssemble(t *testing.T) {
	data := make([]byte, 3<<20+17)
	for i := range data {
		data[i] = byte(i * 31)
	}
	for _, sizes := range [][]int{{0}, {1}, {5, 5, 1}, {1996}, {1996, 1996, 1996, 7}, {toastSegmentMax}, {toastSegmentMax + 1, 3}, {100000, 999999, 1}} {
		var tv toastValue
		var want []byte
		off := 0
		for i := 0; off < len(data) && i < 5000; i++ {
			n := min(sizes[i%len(sizes)], len(data)-off)
			tv.appendChunk(data[off : off+n])
			want = append(want, data[off:off+n]...)
			off += n
			if n == 0 {
				break
			}
		}
		for i, s := range tv.segs {
			if i < len(tv.segs)-1 && len(s) != cap(s) {
				t.Errorf("sizes %v: segment %d not full", sizes, i)
			}
			if cap(s) > max(toastSegmentMax, 4+sizes[0]) {
				t.Errorf("sizes %v: segment %d of %d bytes", sizes, i, cap(s))
			}
		}
		got := tv.assemble()
		if len(got) != 4+len(want) || cap(got) != len(got) || !bytes.Equal(got[4:], want) || tv.segs != nil {
			t.Errorf("sizes %v: assembled %d bytes (cap %d), want 4+%d", sizes, len(got), cap(got), len(want))
		}
	}
}

// FuzzToastExpand splits arbitrary bytes into chunks of fuzzed sizes and
// expands them through an arbitrary pointer: nothing may panic, and an
// uncompressed value must come back as exactly its chunks' bytes.
func FuzzToastExpand(f *testing.F) {
	value := bytes.Repeat([]byte("abcdef"), 700)
	f.Add(value, []byte{200, 7}, int32(len(value)+4), uint32(len(value)))
	lz := lz4Stored(f, value)
	f.Add(lz, []byte{13}, int32(len(value)+4), uint32(len(lz))|uint32(CompressionLZ4)<<30)
	pg := pglzStored(value, 6)
	f.Add(pg, []byte{255, 1, 0}, int32(len(value)+4), uint32(len(pg)))
	f.Add([]byte{}, []byte{}, int32(4), uint32(0))
	f.Fuzz(func(t *testing.T, stored, sizes []byte, rawSize int32, extInfo uint32) {
		tx, _ := newTestTx(TxOptions{MaxValueBytes: 1 << 20}, mainDesc(), toastDesc())
		tv := &toastValue{}
		for i, off := 0, 0; off < len(stored); i++ {
			n := 1
			if len(sizes) > 0 {
				n = max(1, int(sizes[i%len(sizes)])*int(sizes[(i+1)%len(sizes)]))
			}
			n = min(n, len(stored)-off)
			tv.appendChunk(stored[off : off+n])
			tv.next++
			off += n
		}
		tx.toastMap()[toastKey{20001, 7}] = tv
		ptr := externalPointer(rawSize, 0, 0, 7, 20001)
		binary.LittleEndian.PutUint32(ptr[6:], extInfo)
		p := ToastPointer{RawSize: rawSize, ExtInfo: extInfo}
		for range 2 { // the second expansion takes the cached value or error
			out, owned, missing, err := tx.expand(ptr)
			if err != nil {
				continue
			}
			if missing != nil || !owned || len(out) < 4 || int(binary.LittleEndian.Uint32(out)>>2) != len(out) {
				t.Fatalf("expand: %d bytes, owned %v, missing %v", len(out), owned, missing)
			}
			if !p.Compressed() && !bytes.Equal(out[4:], stored) {
				t.Fatalf("uncompressed value of %d bytes came back as %d bytes", len(stored), len(out)-4)
			}
			if p.Compressed() && len(out)-4 != int(rawSize)-4 {
				t.Fatalf("inflated to %d bytes, pointer says %d", len(out)-4, rawSize-4)
			}
		}
	})
}

// BenchmarkTxToast reassembles one value per iteration from 1996-byte
// chunks through Tx.Add (bytes/s is of the value).
func BenchmarkTxToast(b *testing.B) {
	const size = 8 << 20
	value := bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstuvwxyz"), size/36+1)[:size]
	for _, c := range []struct {
		name   string
		stored []byte
		method CompressionMethod
	}{
		{"8MiB", value, CompressionPGLZ},
		{"8MiB-lz4", lz4Stored(b, value), CompressionLZ4},
		{"8MiB-pglz", pglzStored(value, 36), CompressionPGLZ},
	} {
		b.Run(c.name, func(b *testing.B) {
			feeder := newChunkFeeder(b, 4242, len(c.stored))
			ptr := externalPointer(int32(len(value)+4), len(c.stored), c.method, 4242, 20001)
			mainRec := insertRecord(b, 0x7000_0000-0x100, mainRfn, 1, 0, itemTuple(1, ptr, 1))
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				tx, _ := newTestTx(TxOptions{}, mainDesc(), toastDesc())
				lsn := wal.LSN(0x1000)
				feeder.feed(b, tx, &lsn, c.stored)
				rows, err := tx.Add(nil, mainRec, false)
				if err != nil || len(rows[0].Fields[1].Value.(string)) != size {
					b.Fatal(err)
				}
			}
		})
	}
}
