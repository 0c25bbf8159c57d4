package wal

// Slab clones records into shared chunks: a run of records held briefly
// (a batch on its way to the next stage) costs a few allocations per
// chunk instead of three per record. A record cloned into a slab keeps its
// whole chunk reachable, so a record kept long after its neighbours (a
// transaction's commit waiting to be emitted) should be cloned on its own
// (Record.Clone) instead.
//
// The zero Slab is ready to use; it is not safe for concurrent use.
type Slab struct {
	raw    []byte
	recs   []Record
	blocks []BlockRef
}

// Chunk sizes: a record larger than a quarter of slabRawChunk gets its own
// allocation (Record.Clone).
const (
	slabRawChunk   = 64 << 10
	slabRecChunk   = 256
	slabBlockChunk = 256
)

// Clone returns a deep copy of r that does not alias reader memory, as
// Record.Clone does, in the slab's chunks.
func (s *Slab) Clone(r *Record) *Record {
	if len(r.Raw) > slabRawChunk/4 || len(r.Blocks) > slabBlockChunk/4 {
		return r.Clone()
	}
	if cap(s.raw)-len(s.raw) < len(r.Raw) {
		s.raw = make([]byte, 0, slabRawChunk)
	}
	if len(s.recs) == cap(s.recs) {
		s.recs = make([]Record, 0, slabRecChunk)
	}
	if cap(s.blocks)-len(s.blocks) < len(r.Blocks) {
		s.blocks = make([]BlockRef, 0, slabBlockChunk)
	}
	at := len(s.raw)
	s.raw = append(s.raw, r.Raw...)
	s.recs = append(s.recs, *r)
	c := &s.recs[len(s.recs)-1]
	c.Raw = s.raw[at:len(s.raw):len(s.raw)]
	var blocks []BlockRef
	if r.Blocks != nil {
		from := len(s.blocks)
		s.blocks = append(s.blocks, r.Blocks...)
		blocks = s.blocks[from:len(s.blocks):len(s.blocks)]
	}
	if !c.rebaseOnto(r.Raw, blocks) {
		*c = *r.Clone() // a decoded slice outside Raw: decode the copy again
	}
	return c
}
