package wal

import "encoding/binary"

// HeapMultiInsert is XLOG_HEAP2_MULTI_INSERT: several new tuples on block 0
// (COPY FROM, CREATE TABLE AS, catalog bulk inserts). Decode validates every
// tuple, so walking them with Tuples or AppendTuples cannot fail.
type HeapMultiInsert struct {
	InitPage bool // XLOG_HEAP_INIT_PAGE: fresh page, offsets are 1..NTuples
	Rel      RelFileNode
	Block    uint32
	Flags    uint8 // XLHInsert*
	NTuples  int

	// HasTuples is false when block 0 carries no data: it has a full-page
	// image and the relation is not logically logged, so the tuples are only
	// in the image at the offsets OffNum reports.
	HasTuples bool

	offsets []byte // u16 offsets, nil when InitPage
	data    []byte // block 0 data: SHORTALIGNed xl_multi_insert_tuple + bytes, per tuple
}

func (*HeapMultiInsert) walBody() {}

// Decode parses rec, an XLOG_HEAP2_MULTI_INSERT record. The tuples alias rec.
func (dst *HeapMultiInsert) Decode(rec *Record) error {
	const what = "heap multi insert"
	if err := heapCheckOp(rec, what, RmgrHeap2, XLogHeap2MultiInsert); err != nil {
		return err
	}
	*dst = HeapMultiInsert{InitPage: rec.Header.Info&XLogHeapInitPage != 0}
	md := rec.MainData
	if len(md) < sizeOfHeapMultiInsert {
		return errorf(rec.LSN, KindCorrupt, "%s: main data %d bytes, want >= %d", what, len(md), sizeOfHeapMultiInsert)
	}
	dst.Flags = md[0]
	dst.NTuples = int(binary.LittleEndian.Uint16(md[2:]))
	want := sizeOfHeapMultiInsert
	if !dst.InitPage {
		want += 2 * dst.NTuples
	}
	if len(md) != want {
		return errorf(rec.LSN, KindCorrupt, "%s: main data %d bytes, want %d for %d tuples (init page %t)", what, len(md), want, dst.NTuples, dst.InitPage)
	}
	if !dst.InitPage {
		dst.offsets = md[sizeOfHeapMultiInsert:]
	}
	b, err := heapBlock0(rec, what)
	if err != nil {
		return err
	}
	dst.Rel, dst.Block = b.Rel, b.BlockNum
	if len(b.Data) == 0 {
		if dst.Flags&XLHInsertContainsNewTuple != 0 {
			// KEEP_DATA goes with this flag: the writer never drops the tuples.
			return errorf(rec.LSN, KindCorrupt, "%s: flags 0x%02X claim new tuples but block 0 has no data", what, dst.Flags)
		}
		return nil
	}
	dst.data = b.Data
	pos := 0
	for i := 0; i < dst.NTuples; i++ {
		var t HeapTuple
		next, err := decodeMultiInsertTuple(rec.LSN, b.Data, pos, i, &t)
		if err != nil {
			return err
		}
		pos = next
	}
	if pos != len(b.Data) {
		return errorf(rec.LSN, KindCorrupt, "%s: %d tuples end at byte %d of %d bytes of block data", what, dst.NTuples, pos, len(b.Data))
	}
	dst.HasTuples = true
	return nil
}

// decodeMultiInsertTuple reads tuple i whose xl_multi_insert_tuple header is
// at SHORTALIGN(pos) in data, and returns the position after its bytes.
func decodeMultiInsertTuple(lsn LSN, data []byte, pos, i int, t *HeapTuple) (int, error) {
	pos += pos & 1 // the writer SHORTALIGNs each header from an aligned start
	if len(data)-pos < sizeOfMultiInsertTuple {
		return 0, errorf(lsn, KindCorrupt, "heap multi insert: tuple %d header at byte %d past %d bytes of block data", i, pos, len(data))
	}
	n := int(binary.LittleEndian.Uint16(data[pos:]))
	t.Header.decode(data[pos+2:])
	pos += sizeOfMultiInsertTuple
	if len(data)-pos < n {
		return 0, errorf(lsn, KindCorrupt, "heap multi insert: tuple %d datalen %d at byte %d past %d bytes of block data", i, n, pos, len(data))
	}
	t.Data = data[pos : pos+n : pos+n]
	if err := t.check(lsn, "heap multi insert tuple"); err != nil {
		return 0, err
	}
	return pos + n, nil
}

// OffNum returns the line pointer of tuple i (0-based): from the offsets
// array, or i+1 on a re-initialised page.
func (src *HeapMultiInsert) OffNum(i int) uint16 {
	if src.InitPage {
		return uint16(i + 1)
	}
	return binary.LittleEndian.Uint16(src.offsets[2*i:])
}

// MultiInsertTuple is one tuple of a HeapMultiInsert.
type MultiInsertTuple struct {
	OffNum uint16
	Tuple  HeapTuple // Data is bitmap, padding, user data, as for HeapInsert
}

// Tuples returns an iterator over the logged tuples; it yields nothing when
// !HasTuples.
func (src *HeapMultiInsert) Tuples() MultiInsertIter {
	it := MultiInsertIter{src: src}
	if !src.HasTuples {
		it.i = src.NTuples
	}
	return it
}

// AppendTuples appends every logged tuple to dst and returns it.
func (src *HeapMultiInsert) AppendTuples(dst []MultiInsertTuple) []MultiInsertTuple {
	it := src.Tuples()
	var t MultiInsertTuple
	for it.Next(&t) {
		dst = append(dst, t)
	}
	return dst
}

// MultiInsertIter walks the tuples of a HeapMultiInsert without allocating.
type MultiInsertIter struct {
	src *HeapMultiInsert
	i   int
	pos int
}

// Next fills dst with the next tuple and reports whether there was one.
func (it *MultiInsertIter) Next(dst *MultiInsertTuple) bool {
	if it.src == nil || it.i >= it.src.NTuples {
		return false
	}
	next, err := decodeMultiInsertTuple(0, it.src.data, it.pos, it.i, &dst.Tuple)
	if err != nil {
		// Decode validated the data; only a hand-built HeapMultiInsert gets here.
		it.i = it.src.NTuples
		return false
	}
	dst.OffNum = it.src.OffNum(it.i)
	it.pos = next
	it.i++
	return true
}
