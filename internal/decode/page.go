package decode

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/wal"
)

// Heap tuples read from data pages (an initial load from a base backup)
// decode with the WAL path's machinery: an on-page tuple is
// HeapTupleHeaderData (t_xmin, t_xmax, t_cid, t_ctid, t_infomask2,
// t_infomask, t_hoff: 23 bytes) then the bitmap and data, which is exactly
// wal.HeapTuple's Data once the three fields WAL keeps are lifted out.

// PageTupleHeader is the part of an on-page HeapTupleHeaderData the WAL
// shape leaves out and a visibility decision needs.
type PageTupleHeader struct {
	Xmin, Xmax uint32
	Infomask2  uint16
	Infomask   uint16
	Hoff       uint8
}

// PageTuple splits an on-page tuple (one line pointer's lp_len bytes) into
// its header and the WAL shape. Data aliases item. A tuple shorter than the
// header, or whose t_hoff or null bitmap does not fit, is an error.
func PageTuple(item []byte) (PageTupleHeader, wal.HeapTuple, error) {
	if len(item) < sizeofHeapTupleHeader {
		return PageTupleHeader{}, wal.HeapTuple{}, fmt.Errorf("tuple of %d bytes, shorter than the %d-byte header", len(item), sizeofHeapTupleHeader)
	}
	h := PageTupleHeader{
		Xmin:      binary.LittleEndian.Uint32(item[0:]),
		Xmax:      binary.LittleEndian.Uint32(item[4:]),
		Infomask2: binary.LittleEndian.Uint16(item[18:]),
		Infomask:  binary.LittleEndian.Uint16(item[20:]),
		Hoff:      item[22],
	}
	tup := wal.HeapTuple{
		Header: wal.HeapTupleHeader{Infomask2: h.Infomask2, Infomask: h.Infomask, Hoff: h.Hoff},
		Data:   item[sizeofHeapTupleHeader:],
	}
	if h.Hoff < sizeofHeapTupleHeader || int(h.Hoff) > len(item) {
		return h, tup, fmt.Errorf("t_hoff %d outside [%d, %d]", h.Hoff, sizeofHeapTupleHeader, len(item))
	}
	if n := tup.Header.BitmapLen(); n > int(h.Hoff)-sizeofHeapTupleHeader {
		return h, tup, fmt.Errorf("null bitmap of %d attributes needs %d bytes, t_hoff %d leaves %d", tup.Header.Natts(), n, h.Hoff, int(h.Hoff)-sizeofHeapTupleHeader)
	}
	return h, tup, nil
}

// PageRows decodes visible tuples read from heap pages into insert rows,
// with a TOAST chunk store of its own: unlike WAL, pages hold a value's
// chunks in any order and anywhere relative to the rows using them, so
// chunks are kept by sequence number until a row takes the whole value.
// Not safe for concurrent use.
type PageRows struct {
	tx     *Tx
	chunks map[toastKey]*pageToastValue
	// used are the values a row took: their chunks are released, and a
	// second reference (PostgreSQL never makes one visible) is an error
	// rather than a silent duplicate.
	used        map[toastKey]struct{}
	chunkBytes  int64
	rows, taken int64
}

type pageToastValue struct {
	parts map[int32][]byte
	size  int
}

// PageRowsStats counts what a PageRows did.
type PageRowsStats struct {
	Rows        int64 // rows decoded
	ToastChunks int64 // chunks held now (not yet taken by a row)
	ToastBytes  int64 // chunk payload bytes held now
	ToastValues int64 // external values reassembled
}

// NewPageRows starts a decoder for one load.
func NewPageRows(opt TxOptions) *PageRows {
	return &PageRows{
		tx:     NewTx(nil, Commit{}, opt),
		chunks: map[toastKey]*pageToastValue{},
		used:   map[toastKey]struct{}{},
	}
}

// Stats returns the counters so far.
func (p *PageRows) Stats() PageRowsStats {
	var n int64
	for _, v := range p.chunks {
		n += int64(len(v.parts))
	}
	return PageRowsStats{Rows: p.rows, ToastChunks: n, ToastBytes: p.chunkBytes, ToastValues: p.taken}
}

// AddToastChunk records one visible tuple of a TOAST relation (toastDesc is
// that relation). The chunk's bytes are copied.
func (p *PageRows) AddToastChunk(toastDesc *desclog.Descriptor, tup wal.HeapTuple) error {
	t := p.tx
	var err error
	t.arena.datums, err = Deform(toastDesc, tup, t.arena.datums)
	if err != nil {
		return fmt.Errorf("TOAST chunk: %w", err)
	}
	if len(t.arena.datums) != 3 || t.arena.datums[0].Null || t.arena.datums[1].Null || t.arena.datums[2].Null ||
		len(t.arena.datums[0].Raw) != 4 || len(t.arena.datums[1].Raw) != 4 {
		return fmt.Errorf("TOAST relation %s: chunk tuple is not (chunk_id oid, chunk_seq int4, chunk_data bytea)", relName(toastDesc))
	}
	id := binary.LittleEndian.Uint32(t.arena.datums[0].Raw)
	seq := int32(binary.LittleEndian.Uint32(t.arena.datums[1].Raw))
	v, err := ParseVarlena(t.arena.datums[2].Raw)
	if err != nil || (v.Kind != VarlenaShort && v.Kind != VarlenaPlain) {
		return fmt.Errorf("TOAST relation %s value %d chunk %d: chunk_data is not an inline uncompressed varlena (%v)", relName(toastDesc), id, seq, err)
	}
	if seq < 0 {
		return fmt.Errorf("TOAST relation %s value %d: negative chunk_seq %d", relName(toastDesc), id, seq)
	}
	key := toastKey{toastDesc.Oid, id}
	if _, ok := p.used[key]; ok {
		return fmt.Errorf("TOAST relation %s value %d: visible chunk %d after a row took the complete value", relName(toastDesc), id, seq)
	}
	tv := p.chunks[key]
	if tv == nil {
		tv = &pageToastValue{parts: map[int32][]byte{}}
		p.chunks[key] = tv
	}
	if _, dup := tv.parts[seq]; dup {
		return fmt.Errorf("TOAST relation %s value %d: two visible chunks with chunk_seq %d", relName(toastDesc), id, seq)
	}
	if tv.size+len(v.Payload) > t.opt.MaxValueBytes {
		return fmt.Errorf("TOAST relation %s value %d: more than %d bytes of chunks", relName(toastDesc), id, t.opt.MaxValueBytes)
	}
	tv.parts[seq] = append([]byte(nil), v.Payload...)
	tv.size += len(v.Payload)
	p.chunkBytes += int64(len(v.Payload))
	return nil
}

// Row decodes one visible tuple of table desc as an insert at lsn.
// needChunks is true (and r empty) when the tuple references a TOAST value
// whose chunks are not all added yet: call again after more were added.
// Fields pending for the bridge keep their Raw bytes, as on the WAL path.
// The row's memory aliases neither tup nor the chunks.
func (p *PageRows) Row(desc *desclog.Descriptor, descFrom wal.LSN, tup wal.HeapTuple, lsn wal.LSN) (r RowChange, needChunks bool, err error) {
	t := p.tx
	if tup.Header.HasExternal() {
		needChunks, err = p.stageToast(desc, tup, lsn)
		if needChunks || err != nil {
			t.resetToast()
			return RowChange{}, needChunks, err
		}
	}
	fields, raws, err := t.tupleFields(desc, tup, lsn, roleInsert, t.arena.rawNew[:0])
	t.arena.rawNew = raws
	clear(t.arena.rawNew[:cap(t.arena.rawNew)]) // do not pin the page or values
	t.resetToast()
	if err != nil {
		return RowChange{}, false, err
	}
	p.rows++
	return RowChange{Op: OpInsert, LSN: lsn, Desc: desc, DescFrom: descFrom, Fields: fields}, false, nil
}

// stageToast finds tup's external values and, when every one is complete,
// moves their chunks in sequence order into the Tx's store, where
// tupleFields expands them exactly as it does a transaction's.
func (p *PageRows) stageToast(desc *desclog.Descriptor, tup wal.HeapTuple, lsn wal.LSN) (needChunks bool, err error) {
	t := p.tx
	t.arena.datums, err = Deform(desc, tup, t.arena.datums)
	if err != nil {
		return false, fmt.Errorf("LSN %s: %w", lsn, err)
	}
	var ptrs []ToastPointer
	for _, d := range t.arena.datums {
		col := &desc.Columns[d.Column]
		if d.Null || d.Missing != nil || col.Len != -1 {
			continue
		}
		v, err := ParseVarlena(d.Raw)
		if err != nil {
			return false, fmt.Errorf("relation %s, column %q: %w", relName(desc), col.Name, err)
		}
		if v.Kind != VarlenaExternal {
			continue
		}
		ext := v.External
		if !hasPointer(ptrs, ext) {
			ptrs = append(ptrs, ext)
		}
	}
	for _, ptr := range ptrs {
		key := toastKey{ptr.ToastRelID, ptr.ValueID}
		if _, ok := p.used[key]; ok {
			return false, fmt.Errorf("relation %s: TOAST value %d of relation %d is referenced by a second visible row", relName(desc), ptr.ValueID, ptr.ToastRelID)
		}
		tv := p.chunks[key]
		if tv == nil || tv.size < ptr.ExtSize() {
			return true, nil
		}
	}
	for _, ptr := range ptrs {
		key := toastKey{ptr.ToastRelID, ptr.ValueID}
		tv := p.chunks[key]
		seqs := make([]int32, 0, len(tv.parts))
		for s := range tv.parts {
			seqs = append(seqs, s)
		}
		sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
		staged := &toastValue{}
		for i, s := range seqs {
			if s != int32(i) {
				return false, fmt.Errorf("relation %s: TOAST value %d of relation %d has chunks up to %d bytes but chunk %d is missing", relName(desc), ptr.ValueID, ptr.ToastRelID, tv.size, i)
			}
			staged.appendChunk(tv.parts[s])
		}
		staged.next = int32(len(seqs))
		t.toastMap()[key] = staged
		delete(p.chunks, key)
		p.used[key] = struct{}{}
		p.chunkBytes -= int64(tv.size)
		p.taken++
	}
	return false, nil
}

func hasPointer(ptrs []ToastPointer, ext ToastPointer) bool {
	for _, p := range ptrs {
		if p.ToastRelID == ext.ToastRelID && p.ValueID == ext.ValueID {
			return true
		}
	}
	return false
}
