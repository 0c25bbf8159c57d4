package decode

import (
	"encoding/json"
	"time"
	"unsafe"
)

// arena hands out the memory of decoded rows in slabs, so a row costs a few
// allocations per slab instead of one per field: byte copies (Raw, bytea,
// the bytes behind strings) and boxed values (an int64, float64, string or
// time.Time stored in an `any` normally gets its own heap cell).
//
// Everything handed out is immutable afterwards: slabs are append-only and
// a full slab is replaced, never reused, so earlier rows keep pointing at
// valid memory for as long as they live. A nil *arena allocates normally.
type arena struct {
	bytes  []byte
	ints   []int64
	floats []float64
	strs   []string
	times  []time.Time
	fields []Field

	// Scratch of one record's decoding, reused by every transaction
	// decoded from this arena (one goroutine's): a transaction of a few
	// rows would otherwise grow its own each time.
	datums         []Datum
	rawNew, rawOld [][]byte
}

const (
	arenaByteSlab  = 32 << 10
	arenaValueSlab = 256
)

// eface is the runtime layout of an empty interface.
type eface struct {
	typ  unsafe.Pointer
	data unsafe.Pointer
}

func typeWord(v any) unsafe.Pointer { return (*eface)(unsafe.Pointer(&v)).typ }

var (
	int64Type  = typeWord(int64(0))
	float64Typ = typeWord(float64(0))
	stringType = typeWord("")
	numberType = typeWord(json.Number(""))
	timeType   = typeWord(time.Time{})
)

// box builds an interface of type typ whose data word points at p, which the
// caller never writes again (as the runtime does for a heap-allocated copy).
func box(typ, p unsafe.Pointer) any {
	var v any
	e := (*eface)(unsafe.Pointer(&v))
	e.typ, e.data = typ, p
	return v
}

// reserve makes room for n more bytes in the byte slab.
func (a *arena) reserve(n int) {
	if cap(a.bytes)-len(a.bytes) >= n {
		return
	}
	size := arenaByteSlab
	if n > size/4 {
		size = n // big values get their own allocation
	}
	a.bytes = make([]byte, 0, size)
}

// copyBytes returns a copy of b that does not alias it.
func (a *arena) copyBytes(b []byte) []byte {
	if a == nil {
		return append([]byte{}, b...) // empty stays non-nil: an empty bytea is not NULL
	}
	if len(b) == 0 {
		return []byte{}
	}
	a.reserve(len(b))
	start := len(a.bytes)
	a.bytes = append(a.bytes, b...)
	return a.bytes[start:len(a.bytes):len(a.bytes)]
}

// appendStart prepares an append of about n bytes and returns the slab to
// append to; finish the append with endString or endBytes.
func (a *arena) appendStart(n int) []byte {
	a.reserve(n)
	return a.bytes
}

// endBytes takes the bytes appended to buf (as returned by appendStart)
// and makes buf the slab. If the append outgrew the slab, buf is a new array
// (a copy of the slab plus the new bytes): the old array stays valid for its
// earlier users and is never written again.
func (a *arena) endBytes(buf []byte) []byte {
	start := len(a.bytes)
	a.bytes = buf
	return buf[start:len(buf):len(buf)]
}

func (a *arena) boxString(s string) any {
	if a == nil {
		return s
	}
	if len(a.strs) == cap(a.strs) {
		a.strs = make([]string, 0, arenaValueSlab)
	}
	a.strs = append(a.strs, s)
	return box(stringType, unsafe.Pointer(&a.strs[len(a.strs)-1]))
}

// boxNumber boxes a json.Number (a defined string type: same layout).
func (a *arena) boxNumber(n json.Number) any {
	if a == nil {
		return n
	}
	if len(a.strs) == cap(a.strs) {
		a.strs = make([]string, 0, arenaValueSlab)
	}
	a.strs = append(a.strs, string(n))
	return box(numberType, unsafe.Pointer(&a.strs[len(a.strs)-1]))
}

func (a *arena) boxInt(v int64) any {
	if a == nil || (v >= 0 && v < 256) { // the runtime boxes small values without allocating
		return v
	}
	if len(a.ints) == cap(a.ints) {
		a.ints = make([]int64, 0, arenaValueSlab)
	}
	a.ints = append(a.ints, v)
	return box(int64Type, unsafe.Pointer(&a.ints[len(a.ints)-1]))
}

func (a *arena) boxFloat(v float64) any {
	if a == nil {
		return v
	}
	if len(a.floats) == cap(a.floats) {
		a.floats = make([]float64, 0, arenaValueSlab)
	}
	a.floats = append(a.floats, v)
	return box(float64Typ, unsafe.Pointer(&a.floats[len(a.floats)-1]))
}

func (a *arena) boxTime(v time.Time) any {
	if a == nil {
		return v
	}
	if len(a.times) == cap(a.times) {
		a.times = make([]time.Time, 0, arenaValueSlab)
	}
	a.times = append(a.times, v)
	return box(timeType, unsafe.Pointer(&a.times[len(a.times)-1]))
}

// fieldSlice returns n zeroed Fields with capacity n.
func (a *arena) fieldSlice(n int) []Field {
	if n > arenaValueSlab/4 {
		return make([]Field, n)
	}
	if cap(a.fields)-len(a.fields) < n {
		a.fields = make([]Field, 0, arenaValueSlab)
	}
	start := len(a.fields)
	a.fields = a.fields[:start+n]
	return a.fields[start : start+n : start+n]
}
