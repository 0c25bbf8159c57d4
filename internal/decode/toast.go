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

type toastKey struct{ rel, id uint32 }

type toastValue struct {
	// buf is 4 reserved bytes (the plain varlena header written at
	// reassembly) followed by the chunks' bytes in sequence order.
	buf  []byte
	next int32 // next expected chunk_seq
	err  error // first inconsistency, reported when the value is used
}

// addChunk records one chunk tuple of TOAST relation desc.
func (t *Tx) addChunk(desc *desclog.Descriptor, tup wal.HeapTuple, lsn wal.LSN) error {
	var err error
	t.datums, err = Deform(desc, tup, t.datums)
	if err != nil {
		return fmt.Errorf("LSN %s: TOAST chunk: %w", lsn, err)
	}
	if len(t.datums) != 3 || t.datums[0].Null || t.datums[1].Null || t.datums[2].Null ||
		len(t.datums[0].Raw) != 4 || len(t.datums[1].Raw) != 4 {
		return fmt.Errorf("LSN %s: TOAST relation %s: chunk tuple is not (chunk_id oid, chunk_seq int4, chunk_data bytea)", lsn, relName(desc))
	}
	id := binary.LittleEndian.Uint32(t.datums[0].Raw)
	seq := int32(binary.LittleEndian.Uint32(t.datums[1].Raw))
	v, err := ParseVarlena(t.datums[2].Raw)
	if err != nil || (v.Kind != VarlenaShort && v.Kind != VarlenaPlain) {
		return fmt.Errorf("LSN %s: TOAST relation %s value %d chunk %d: chunk_data is not an inline uncompressed varlena (%v)", lsn, relName(desc), id, seq, err)
	}
	t.stats.ToastChunks++
	key := toastKey{desc.Oid, id}
	tv := t.toast[key]
	if tv == nil {
		tv = &toastValue{buf: make([]byte, 4, 4+len(v.Payload))}
		t.toast[key] = tv
	}
	t.toastChunks++
	switch {
	case tv.err != nil:
		return nil
	case seq != tv.next:
		tv.err = fmt.Errorf("TOAST value %d of relation %d: chunk %d at LSN %s, expected chunk %d", id, desc.Oid, seq, lsn, tv.next)
		return nil
	case len(tv.buf)-4+len(v.Payload) > t.opt.MaxValueBytes:
		tv.err = fmt.Errorf("TOAST value %d of relation %d: more than %d bytes of chunks", id, desc.Oid, t.opt.MaxValueBytes)
		tv.buf = nil
		return nil
	}
	tv.buf = append(tv.buf, v.Payload...)
	tv.next++
	return nil
}

// resetToast drops the collected chunks (after a main-table change).
func (t *Tx) resetToast() {
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
	tv := t.toast[toastKey{p.ToastRelID, p.ValueID}]
	if tv == nil {
		return nil, false, &p, nil
	}
	if tv.err != nil {
		return nil, false, nil, tv.err
	}
	rawSize := int(p.RawSize) - 4
	if rawSize < 0 || rawSize > t.opt.MaxValueBytes {
		return nil, false, nil, fmt.Errorf("TOAST value %d of relation %d: size %d outside [0, %d]", p.ValueID, p.ToastRelID, rawSize, t.opt.MaxValueBytes)
	}
	data := tv.buf[4:]
	if len(data) != p.ExtSize() {
		return nil, false, nil, fmt.Errorf("TOAST value %d of relation %d: %d chunks hold %d bytes, the pointer says %d", p.ValueID, p.ToastRelID, tv.next, len(data), p.ExtSize())
	}
	t.stats.ToastValues++
	t.toastUsed += int64(tv.next)
	if !p.Compressed() {
		binary.LittleEndian.PutUint32(tv.buf, uint32(len(tv.buf))<<2)
		return tv.buf, true, nil, nil
	}
	// Stored compressed: va_tcinfo (raw size, method) then the compressed bytes.
	if len(data) < 4 {
		return nil, false, nil, fmt.Errorf("TOAST value %d of relation %d: compressed value of %d bytes", p.ValueID, p.ToastRelID, len(data))
	}
	out, err = t.inflate(data[4:], rawSize, p.Method())
	if err != nil {
		return nil, false, nil, fmt.Errorf("TOAST value %d of relation %d: %w", p.ValueID, p.ToastRelID, err)
	}
	return out, true, nil, nil
}

// inflate decompresses src to exactly rawSize bytes behind a plain 4-byte
// varlena header.
func (t *Tx) inflate(src []byte, rawSize int, method CompressionMethod) ([]byte, error) {
	var buf []byte
	if rawSize+4 <= arenaByteSlab/4 {
		t.arena.reserve(rawSize + 4)
		start := len(t.arena.bytes)
		t.arena.bytes = t.arena.bytes[:start+4+rawSize]
		buf = t.arena.bytes[start : start+4+rawSize : start+4+rawSize]
	} else {
		buf = make([]byte, 4+rawSize)
	}
	out, err := Decompress(buf[4:4], src, rawSize, method)
	if err != nil {
		return nil, err
	}
	if len(out) != rawSize {
		return nil, fmt.Errorf("%s: inflated to %d bytes, want %d", method, len(out), rawSize)
	}
	if rawSize > 0 && &out[0] != &buf[4] {
		copy(buf[4:], out)
	}
	binary.LittleEndian.PutUint32(buf, uint32(4+rawSize)<<2)
	return buf, nil
}
