package filter

import (
	"sync"

	"github.com/walshadow/walshadow/internal/wal"
)

// pageCopies remembers, per user relation file, where its main fork last
// received a whole page image (XLOG_FPI: log_newpage). A file that
// receives page images was filled by copying pages (ALTER TABLE SET
// TABLESPACE copies the old file's pages, VACUUM FULL and CLUSTER write
// the new heap's pages, vacuum logs an empty page it initialises); a file
// that ALTER TABLE's rewrite (ATRewriteTable) filled holds only the heap
// inserts of its rows. The decoder asks this to tell the two apart, so
// entries are kept past the file's drop (a later transaction may drop it
// before the decoder reaches the one that made it), and past the resume
// floor too while there are few: the floor can pass the page copies of a
// transaction whose commit the decoder has yet to reach (the reorderer
// buffers nothing of a transaction that only copied pages and changed
// catalogs, so it holds no floor until its commit), and forgetting them
// there made the decoder take a copied file for a rewrite that wrote no
// rows. Past maxKept entries, those below the floor go. The pump writes,
// the decoder reads: a mutex of its own.
type pageCopies struct {
	mu   sync.Mutex
	last map[wal.RelFileNode]wal.LSN
	// maxKept: entries kept whatever the floor (pageCopiesKept when 0).
	maxKept int
}

// pageCopiesKept is how many files' page copies are kept whatever the
// floor: one entry per file, a few tens of bytes each.
const pageCopiesKept = 1 << 16

func (p *pageCopies) note(rec *wal.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range rec.Blocks {
		b := &rec.Blocks[i]
		if b.Fork() != wal.ForkMain {
			continue
		}
		if p.last == nil {
			p.last = make(map[wal.RelFileNode]wal.LSN)
		}
		p.last[b.Rel] = rec.LSN
	}
}

func (p *pageCopies) has(rfn wal.RelFileNode) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.last[rfn]
	return ok
}

func (p *pageCopies) forgetBelow(floor wal.LSN) {
	p.mu.Lock()
	defer p.mu.Unlock()
	keep := p.maxKept
	if keep == 0 {
		keep = pageCopiesKept
	}
	if len(p.last) <= keep {
		return
	}
	for rfn, lsn := range p.last {
		if lsn < floor {
			delete(p.last, rfn)
		}
	}
}
