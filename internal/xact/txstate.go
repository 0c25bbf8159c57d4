package xact

import "github.com/walshadow/walshadow/internal/wal"

const (
	minChunk        = 512
	maxChunk        = 1 << 20
	maxPooledStates = 256
	entrySize       = 32 // unsafe.Sizeof(entry{})
)

// entry is one in-memory record: its bytes live in txState.chunks. It holds
// no pointers so the GC never scans entry slices.
type entry struct {
	lsn, next wal.LSN
	chunk     uint32
	off       uint32
	length    uint32
	flags     uint8
}

// txState is everything buffered for one xid.
type txState struct {
	xid               uint32
	firstLSN, lastLSN wal.LSN
	records           int // spilled + in memory

	entries  []entry
	chunks   [][]byte
	memBytes int64 // Raw bytes of entries
	// chunkSize is the size of the last chunk: after a spill frees the
	// chunks, growth resumes there instead of at minChunk.
	chunkSize int

	spillPath    string // "" until the first spill
	spillRecords int
	spillSize    int64 // bytes written to spillPath

	prepared bool
	// children are subxids announced for this top xid by an ASSIGNMENT or
	// a PREPARE: its Commit and Abort take them along with the listed ones.
	children []uint32
}

func (tx *txState) raw(e *entry) []byte {
	return tx.chunks[e.chunk][e.off : e.off+e.length : e.off+e.length]
}

// arenaPool recycles chunks (per power-of-two size class, up to maxFree
// bytes in all) and txStates with their entry slices between
// transactions, so steady-state buffering allocates nothing.
type arenaPool struct {
	free      [chunkClasses][][]byte
	freeBytes int // chunk bytes pooled
	maxFree   int // bound on freeBytes, and separately on entryBytes
	// txStates are released states; entryBytes counts their entry slices.
	txStates   []*txState
	entryBytes int
}

// chunkClasses covers minChunk << 0 ... minChunk << (chunkClasses-1) == maxChunk.
const chunkClasses = 12

func chunkClass(size int) (int, bool) {
	for c := 0; c < chunkClasses; c++ {
		if minChunk<<c == size {
			return c, true
		}
	}
	return 0, false
}

func (p *arenaPool) chunk(size int) []byte {
	if c, ok := chunkClass(size); ok {
		if n := len(p.free[c]); n > 0 {
			buf := p.free[c][n-1]
			p.free[c][n-1] = nil
			p.free[c] = p.free[c][:n-1]
			p.freeBytes -= size
			return buf[:0]
		}
	}
	return make([]byte, 0, size)
}

func (p *arenaPool) putChunk(buf []byte) {
	c, ok := chunkClass(cap(buf))
	if !ok || p.freeBytes+cap(buf) > p.maxFree {
		return
	}
	p.free[c] = append(p.free[c], buf[:0])
	p.freeBytes += cap(buf)
}

// appendRaw copies raw into tx's arena and returns where it went.
func (p *arenaPool) appendRaw(tx *txState, raw []byte) (chunk, off uint32) {
	n := len(tx.chunks)
	if n > 0 {
		c := tx.chunks[n-1]
		if cap(c)-len(c) >= len(raw) {
			tx.chunks[n-1] = append(c, raw...)
			return uint32(n - 1), uint32(len(c))
		}
	}
	size := minChunk
	if n > 0 {
		size = min(2*cap(tx.chunks[n-1]), maxChunk)
	} else if tx.chunkSize > 0 {
		size = min(tx.chunkSize, maxChunk)
	}
	for size < len(raw) && size < maxChunk {
		size *= 2
	}
	if len(raw) > size {
		size = len(raw) // a record bigger than a chunk gets its own
	}
	c := append(p.chunk(size), raw...)
	tx.chunks = append(tx.chunks, c)
	return uint32(n), 0
}

// releaseMemory drops tx's in-memory records, keeping its entry slice for
// the records still to come and pooling its chunks.
func (p *arenaPool) releaseMemory(tx *txState) {
	for i, c := range tx.chunks {
		tx.chunkSize = cap(c)
		p.putChunk(c)
		tx.chunks[i] = nil
	}
	tx.chunks = tx.chunks[:0]
	tx.entries = tx.entries[:0]
	tx.memBytes = 0
}

// newTx returns a cleared txState, reusing a released one when it can.
func (p *arenaPool) newTx(xid uint32, first wal.LSN) *txState {
	var tx *txState
	if n := len(p.txStates); n > 0 {
		tx = p.txStates[n-1]
		p.txStates[n-1] = nil
		p.txStates = p.txStates[:n-1]
		p.entryBytes -= cap(tx.entries) * entrySize
	} else {
		tx = &txState{}
	}
	tx.xid, tx.firstLSN = xid, first
	return tx
}

// release returns tx and its memory to the pool; tx must not be used again.
func (p *arenaPool) release(tx *txState) {
	p.releaseMemory(tx)
	entries, chunks := tx.entries, tx.chunks
	*tx = txState{chunks: chunks}
	if len(p.txStates) >= maxPooledStates {
		return
	}
	if n := cap(entries) * entrySize; p.entryBytes+n <= p.maxFree {
		tx.entries = entries[:0]
		p.entryBytes += n
	}
	p.txStates = append(p.txStates, tx)
}
