package decode

import (
	"encoding/binary"
	"fmt"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/wal"
)

// TOAST reassembly follows PostgreSQL's reorder buffer: an INSERT into a
// TOAST relation is a chunk (chunk_id oid, chunk_seq int4, chunk_data
// bytea), collected per (TOAST relation oid, chunk_id); a main-table datum
// that is an external pointer takes its value from those chunks; the
// collected chunks are dropped after every main-table change (after the
// last record of a multi-insert), since the writer toasts a row's values
// right before logging the row.
//
// Memory: a value of N bytes costs about N while its chunks arrive and N
// again, once, when a pointer makes it a plain varlena (exactly the
// pointer's size, or RawSize for a compressed one); the chunks are released
// right then. The size is unknown until the pointer arrives with the main
// tuple, so chunks are kept in segments rather than one growing buffer
// (whose copies on growth cost several times N for a large value).

type toastKey struct{ rel, id uint32 }

const (
	// toastSegmentMax caps a chunk segment: the unused tail of the last
	// segment is the only slack in a value's chunk storage.
	toastSegmentMax = 1 << 20
	// varHdrSz is the plain 4-byte varlena header an expanded value gets.
	varHdrSz = 4
)

type toastValue struct {
	// segs hold the chunks' bytes in sequence order, each chunk copied once
	// out of its record. The first segment is varHdrSz reserved bytes and
	// the first chunk, so a one-chunk value becomes a plain varlena in
	// place. Every segment but the last is full.
	segs [][]byte
	size int   // chunk bytes collected
	next int32 // next expected chunk_seq
	err  error // first inconsistency, reported when the value is used

	// expanded is the plain varlena the first pointer to the value got;
	// segs are released then. A further pointer to the same value (never
	// written by PostgreSQL, cheap to allow) gets the same bytes.
	expanded []byte
	ptr      ToastPointer
}

// addChunk records one chunk tuple of TOAST relation desc. A chunk that
// cannot be read fails no transaction: it poisons its value (or, when even
// its chunk_id is unreadable, every value of its TOAST relation until the
// next reset), and the row that points at it fails its own relation.
func (t *Tx) addChunk(desc *desclog.Descriptor, tup wal.HeapTuple, lsn wal.LSN) {
	var err error
	t.arena.datums, err = Deform(desc, tup, t.arena.datums)
	if err != nil {
		t.breakToast(desc.Oid, fmt.Errorf("TOAST relation %s: chunk at LSN %s does not decode: %w", relName(desc), lsn, err))
		return
	}
	if len(t.arena.datums) != 3 || t.arena.datums[0].Null || t.arena.datums[1].Null || t.arena.datums[2].Null ||
		len(t.arena.datums[0].Raw) != 4 || len(t.arena.datums[1].Raw) != 4 {
		t.breakToast(desc.Oid, fmt.Errorf("TOAST relation %s: chunk tuple at LSN %s is not (chunk_id oid, chunk_seq int4, chunk_data bytea)", relName(desc), lsn))
		return
	}
	id := binary.LittleEndian.Uint32(t.arena.datums[0].Raw)
	seq := int32(binary.LittleEndian.Uint32(t.arena.datums[1].Raw))
	t.stats.ToastChunks++
	key := toastKey{desc.Oid, id}
	tv := t.toast[key]
	if tv == nil {
		tv = &toastValue{}
		t.toastMap()[key] = tv
	}
	t.toastChunks++
	if tv.err != nil {
		return
	}
	v, err := ParseVarlena(t.arena.datums[2].Raw)
	switch {
	case err != nil || (v.Kind != VarlenaShort && v.Kind != VarlenaPlain):
		tv.err = fmt.Errorf("TOAST value %d of relation %s: chunk %d at LSN %s: chunk_data is not an inline uncompressed varlena (%v)", id, relName(desc), seq, lsn, err)
		tv.segs, tv.expanded = nil, nil
	case tv.expanded != nil:
		tv.err = fmt.Errorf("TOAST value %d of relation %d: chunk %d at LSN %s arrives after a row used the value", id, desc.Oid, seq, lsn)
		tv.expanded = nil
	case seq != tv.next:
		tv.err = fmt.Errorf("TOAST value %d of relation %d: chunk %d at LSN %s, expected chunk %d", id, desc.Oid, seq, lsn, tv.next)
		tv.segs = nil
	case tv.size+len(v.Payload) > t.opt.MaxValueBytes:
		tv.err = fmt.Errorf("TOAST value %d of relation %d: more than %d bytes of chunks", id, desc.Oid, t.opt.MaxValueBytes)
		tv.segs = nil
	default:
		tv.appendChunk(v.Payload)
		tv.next++
	}
}

// appendChunk copies p behind the bytes collected so far, filling the last
// segment before starting a new one. Segments double with the value up to
// toastSegmentMax, so a value has a few segments per MiB at most.
func (tv *toastValue) appendChunk(p []byte) {
	for len(p) > 0 {
		if len(tv.segs) == 0 {
			// Exactly one chunk: a one-chunk value becomes a plain varlena in
			// place with no slack kept alive behind it; a longer one is
			// copied once at its exact size anyway.
			tv.segs = append(tv.segs, make([]byte, varHdrSz, varHdrSz+len(p)))
		}
		last := &tv.segs[len(tv.segs)-1]
		if len(*last) == cap(*last) {
			tv.segs = append(tv.segs, make([]byte, 0, min(max(tv.size, len(p)), toastSegmentMax)))
			last = &tv.segs[len(tv.segs)-1]
		}
		n := min(len(p), cap(*last)-len(*last))
		*last = append(*last, p[:n]...)
		tv.size += n
		p = p[n:]
	}
}

// assemble returns the collected bytes behind varHdrSz bytes of room for a
// header: in place when they fit in the first segment, else copied once
// into a buffer of exactly that size. The segments are released.
func (tv *toastValue) assemble() []byte {
	segs := tv.segs
	tv.segs = nil
	n := varHdrSz + tv.size
	if len(segs) == 1 {
		return segs[0][:n:n]
	}
	buf := make([]byte, varHdrSz, n)
	for i, s := range segs {
		if i == 0 {
			s = s[varHdrSz:]
		}
		buf = append(buf, s...)
		segs[i] = nil // the collector may take each segment once copied
	}
	return buf
}

// resetToast drops the collected chunks (after a main-table change).
func (t *Tx) resetToast() {
	if len(t.toastBroken) != 0 {
		clear(t.toastBroken)
	}
	if len(t.toast) == 0 {
		return
	}
	t.stats.ToastChunksUnused += t.toastChunks - t.toastUsed
	clear(t.toast)
	t.toastChunks, t.toastUsed = 0, 0
}

// expand turns one stored varlena into a plain inline datum: short and
// plain ones as they are (aliasing the record), compressed ones inflated,
// external ones reassembled from the transaction's chunks. A pointer whose
// chunks are not here comes back as ptr (raw nil) for the caller to judge.
//
// An owned result is memory the Tx never writes again (a buffer of its own,
// or for a small inflated value a piece of the append-only arena), not
// reused after resetToast either: the caller may alias it, e.g. with
// unsafe.String over a text payload, instead of copying it.
func (t *Tx) expand(raw []byte) (out []byte, owned bool, ptr *ToastPointer, err error) {
	v, err := ParseVarlena(raw)
	if err != nil {
		return nil, false, nil, err
	}
	switch v.Kind {
	case VarlenaShort, VarlenaPlain:
		return raw, false, nil, nil
	case VarlenaCompressed:
		if v.RawSize > t.opt.MaxValueBytes {
			return nil, false, nil, fmt.Errorf("compressed value of %d bytes exceeds the %d-byte limit", v.RawSize, t.opt.MaxValueBytes)
		}
		out, err := t.inflate(v.Payload, v.RawSize, v.Method)
		return out, true, nil, err
	}
	p := v.External
	if err, ok := t.toastBroken[p.ToastRelID]; ok {
		return nil, false, nil, err
	}
	tv := t.toast[toastKey{p.ToastRelID, p.ValueID}]
	if tv == nil {
		return nil, false, &p, nil
	}
	if tv.err != nil {
		return nil, false, nil, tv.err
	}
	if tv.expanded != nil {
		if tv.ptr != p {
			return nil, false, nil, fmt.Errorf("TOAST value %d of relation %d: referenced again with a different pointer (size %d/%d, then %d/%d)",
				p.ValueID, p.ToastRelID, tv.ptr.RawSize, tv.ptr.ExtSize(), p.RawSize, p.ExtSize())
		}
		return tv.expanded, true, nil, nil
	}
	rawSize := int(p.RawSize) - varHdrSz
	if rawSize < 0 || rawSize > t.opt.MaxValueBytes {
		return nil, false, nil, fmt.Errorf("TOAST value %d of relation %d: size %d outside [0, %d]", p.ValueID, p.ToastRelID, rawSize, t.opt.MaxValueBytes)
	}
	if tv.size != p.ExtSize() {
		return nil, false, nil, fmt.Errorf("TOAST value %d of relation %d: %d chunks hold %d bytes, the pointer says %d", p.ValueID, p.ToastRelID, tv.next, tv.size, p.ExtSize())
	}
	// Stored compressed: va_tcinfo (raw size, method) then the compressed bytes.
	if p.Compressed() && tv.size < 4 {
		return nil, false, nil, fmt.Errorf("TOAST value %d of relation %d: compressed value of %d bytes", p.ValueID, p.ToastRelID, tv.size)
	}
	t.stats.ToastValues++
	t.toastUsed += int64(tv.next)
	buf := tv.assemble()
	if !p.Compressed() {
		binary.LittleEndian.PutUint32(buf, uint32(len(buf))<<2)
		out = buf
	} else {
		out, err = t.inflate(buf[varHdrSz+4:], rawSize, p.Method())
		if err != nil {
			tv.err = fmt.Errorf("TOAST value %d of relation %d: %w", p.ValueID, p.ToastRelID, err)
			return nil, false, nil, tv.err
		}
	}
	tv.expanded, tv.ptr = out, p
	return out, true, nil, nil
}

// inflate decompresses src to exactly rawSize bytes behind a plain 4-byte
// varlena header: small values into the arena, large ones into a buffer of
// exactly that size (the only copy of the value).
func (t *Tx) inflate(src []byte, rawSize int, method CompressionMethod) ([]byte, error) {
	var buf []byte
	if rawSize+varHdrSz <= arenaByteSlab/4 {
		t.arena.reserve(rawSize + varHdrSz)
		start := len(t.arena.bytes)
		t.arena.bytes = t.arena.bytes[:start+varHdrSz+rawSize]
		buf = t.arena.bytes[start : start+varHdrSz+rawSize : start+varHdrSz+rawSize]
	} else {
		buf = make([]byte, varHdrSz+rawSize)
	}
	out, err := Decompress(buf[varHdrSz:varHdrSz], src, rawSize, method)
	if err != nil {
		return nil, err
	}
	if len(out) != rawSize {
		return nil, fmt.Errorf("%s: inflated to %d bytes, want %d", method, len(out), rawSize)
	}
	if rawSize > 0 && &out[0] != &buf[varHdrSz] {
		copy(buf[varHdrSz:], out)
	}
	binary.LittleEndian.PutUint32(buf, uint32(varHdrSz+rawSize)<<2)
	return buf, nil
}
