package pagewalk

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/wal"
)

// DefaultTablespaceOid is pg_default, whose relations live under base/.
const DefaultTablespaceOid = 1663

// DefaultSpoolBytes is the memory budget for deferred tuples when
// Config.SpoolBytes is 0.
const DefaultSpoolBytes = 64 << 20

// emitBatchRows is how many rows of one table are handed to emit at once.
const emitBatchRows = 1024

// Target is one table to load.
type Target struct {
	Desc     *desclog.Descriptor
	DescFrom wal.LSN
	Toast    *desclog.Descriptor // its TOAST relation; nil: none
}

// Config says what Walk loads.
type Config struct {
	DbOid uint32
	// Targets by the relfilenode of the main fork (Desc.Rfn.RelNum); the
	// TOAST relation's files are found by Toast.Rfn.RelNum.
	Targets map[uint32]Target
	// LSN is the position every emitted row carries.
	LSN wal.LSN
	// SpoolBytes bounds the memory of tuples deferred to the end of the
	// archive (0: DefaultSpoolBytes); past it they spill to a temp file in
	// SpillDir, and with no SpillDir the walk fails.
	SpoolBytes int
	SpillDir   string
	// DataChecksums: the cluster has data checksums, so every initialized
	// page's pd_checksum is verified.
	DataChecksums bool
}

// Stats counts what Walk did.
type Stats struct {
	Pages            int64 // pages of target files read (new pages included)
	Tuples           int64 // LP_NORMAL tuples of the targets and their TOAST relations
	Emitted          int64 // rows emitted
	SkippedInvisible int64 // tuples (rows and chunks) the gate rejected
	Deferred         int64 // tuples spooled to the end of the archive: undecided by hint bits, or rows waiting for TOAST chunks
	Bytes            int64 // bytes of target relation files read
	SpilledBytes     int64 // spool bytes written to the spill directory
}

// relFile is a relfilenode Walk reads.
type relFile struct {
	target *Target
	oid    uint32 // the table's oid (for a TOAST relation, its table's)
	toast  bool
	seen   bool
}

type walker struct {
	ctx   context.Context
	cfg   Config
	emit  func(oid uint32, rows []decode.RowChange) error
	rels  map[uint32]*relFile
	rows  *decode.PageRows
	clog  *Clog
	multi *Multixacts

	budget     int64
	toastSpool spool
	rowSpool   spool
	batches    map[uint32][]decode.RowChange
	stats      Stats
	page       []byte
}

// Walk reads one tablespace tar stream (the default tablespace:
// base/<db>/<relfilenode>[.N]) and emits every visible row of the targets
// as decode.RowChange (Op insert, LSN cfg.LSN). Tuples the hint bits do not
// decide wait until pg_xact and pg_multixact have been read, which may come
// after base/ in the archive. It is pure: no I/O except reading r and the
// spill dir. Rows may arrive out of table order; emit may keep the slice.
//
// Memory: deferred tuples are bounded by SpoolBytes (then spilled), but
// visible TOAST chunks are held in memory until the row using them is
// decoded, so a TOAST relation read before its table costs its visible
// size.
func Walk(ctx context.Context, r io.Reader, cfg Config, emit func(oid uint32, rows []decode.RowChange) error) (Stats, error) {
	w := &walker{
		ctx: ctx, cfg: cfg, emit: emit,
		rels:    map[uint32]*relFile{},
		rows:    decode.NewPageRows(decode.TxOptions{ToastPolicy: decode.ToastFail}),
		clog:    NewClog(),
		multi:   NewMultixacts(),
		batches: map[uint32][]decode.RowChange{},
		page:    make([]byte, BlockSize),
	}
	if err := w.index(); err != nil {
		return Stats{}, err
	}
	w.budget = int64(cfg.SpoolBytes)
	if w.budget <= 0 {
		w.budget = DefaultSpoolBytes
	}
	w.toastSpool = spool{dir: cfg.SpillDir, budget: &w.budget, limit: int(w.budget)}
	w.rowSpool = spool{dir: cfg.SpillDir, budget: &w.budget, limit: int(w.budget)}
	err := w.run(r)
	for _, s := range []*spool{&w.toastSpool, &w.rowSpool} {
		w.stats.SpilledBytes += s.spilled
		if cerr := s.close(); err == nil {
			err = cerr
		}
	}
	return w.stats, err
}

// index checks the targets and maps their relfilenodes.
func (w *walker) index() error {
	for rfn, t := range w.cfg.Targets {
		t := t
		d := t.Desc
		if d == nil {
			return fmt.Errorf("target relfilenode %d has no descriptor", rfn)
		}
		if err := w.checkRel(d, 'r', rfn); err != nil {
			return err
		}
		w.addRel(d.Rfn.RelNum, &relFile{target: &t, oid: d.Oid})
		// A relfilenode named twice is left nil and refused by run.
		switch {
		case t.Toast == nil && d.ToastOid != 0:
			return fmt.Errorf("table %s.%s (oid %d) has TOAST relation %d but the target gives no TOAST descriptor", d.Namespace, d.Name, d.Oid, d.ToastOid)
		case t.Toast != nil:
			if t.Toast.Oid != d.ToastOid {
				return fmt.Errorf("table %s.%s (oid %d): TOAST descriptor is relation %d, the table's TOAST relation is %d", d.Namespace, d.Name, d.Oid, t.Toast.Oid, d.ToastOid)
			}
			if err := w.checkRel(t.Toast, 't', t.Toast.Rfn.RelNum); err != nil {
				return err
			}
			w.addRel(t.Toast.Rfn.RelNum, &relFile{target: &t, oid: d.Oid, toast: true})
		}
	}
	return nil
}

func (w *walker) addRel(rfn uint32, rf *relFile) {
	if _, dup := w.rels[rfn]; dup {
		w.rels[rfn] = nil // reported by index
		return
	}
	w.rels[rfn] = rf
}

func (w *walker) checkRel(d *desclog.Descriptor, kind byte, key uint32) error {
	name := fmt.Sprintf("%s.%s (oid %d)", d.Namespace, d.Name, d.Oid)
	switch {
	case d.Kind != kind:
		return fmt.Errorf("relation %s has relkind %q, want %q", name, d.Kind, kind)
	case d.Rfn.RelNum == 0 || d.Rfn.RelNum != key:
		return fmt.Errorf("relation %s has relfilenode %d, keyed as %d", name, d.Rfn.RelNum, key)
	case d.Rfn.SpcOid != DefaultTablespaceOid:
		return fmt.Errorf("relation %s is in tablespace %d: only the default tablespace (%d, base/) is walked", name, d.Rfn.SpcOid, DefaultTablespaceOid)
	case d.Rfn.DbOid != w.cfg.DbOid || d.DbOid != w.cfg.DbOid:
		return fmt.Errorf("relation %s is in database %d, the walk loads database %d", name, d.Rfn.DbOid, w.cfg.DbOid)
	}
	return nil
}

func (w *walker) run(r io.Reader) error {
	for rfn, rf := range w.rels {
		if rf == nil {
			return fmt.Errorf("relfilenode %d is named by two target relations", rfn)
		}
	}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading the backup archive: %w", err)
		}
		if err := w.ctx.Err(); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		if err := w.entry(tr, hdr); err != nil {
			return err
		}
	}
	for rfn, rf := range w.rels {
		if !rf.seen {
			d := rf.target.Desc
			return fmt.Errorf("relation file base/%d/%d of %s.%s (oid %d) is not in the backup archive", w.cfg.DbOid, rfn, d.Namespace, d.Name, d.Oid)
		}
	}
	if err := w.resolveDeferred(); err != nil {
		return err
	}
	return w.flushAll()
}

// entry dispatches one archive member.
func (w *walker) entry(tr *tar.Reader, hdr *tar.Header) error {
	name := strings.TrimPrefix(path.Clean(hdr.Name), "./")
	dir, file := path.Split(name)
	switch dir {
	case "pg_xact/":
		data, err := w.readSLRU(tr, hdr)
		if err != nil {
			return err
		}
		return w.clog.AddSegment(file, data)
	case "pg_multixact/offsets/":
		data, err := w.readSLRU(tr, hdr)
		if err != nil {
			return err
		}
		return w.multi.AddOffsets(file, data)
	case "pg_multixact/members/":
		data, err := w.readSLRU(tr, hdr)
		if err != nil {
			return err
		}
		return w.multi.AddMembers(file, data)
	case "base/" + strconv.FormatUint(uint64(w.cfg.DbOid), 10) + "/":
		rfn, seg, ok := parseRelFile(file)
		if !ok {
			return nil
		}
		rf := w.rels[rfn]
		if rf == nil {
			return nil
		}
		if seg == 0 {
			rf.seen = true
		}
		return w.relationFile(tr, name, hdr.Size, rf, rfn, seg)
	}
	return nil
}

// readSLRU reads one SLRU segment file (at most 256 KiB) into memory.
func (w *walker) readSLRU(r io.Reader, hdr *tar.Header) ([]byte, error) {
	if hdr.Size < 0 || hdr.Size > slruSegmentBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than one SLRU segment", hdr.Name, hdr.Size)
	}
	data := make([]byte, hdr.Size)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, fmt.Errorf("reading %s from the backup archive: %w", hdr.Name, err)
	}
	return data, nil
}

// parseRelFile splits "<relfilenode>[.<segment>]" of a main fork; other
// forks (_fsm, _vm, _init) and anything else give ok false.
func parseRelFile(name string) (rfn, seg uint32, ok bool) {
	base, segText, hasSeg := strings.Cut(name, ".")
	n, err := strconv.ParseUint(base, 10, 32)
	if err != nil || n == 0 {
		return 0, 0, false
	}
	if hasSeg {
		s, err := strconv.ParseUint(segText, 10, 32)
		if err != nil || s == 0 {
			return 0, 0, false
		}
		seg = uint32(s)
	}
	return uint32(n), seg, true
}

// relationFile walks one segment file of a target relation page by page.
func (w *walker) relationFile(r io.Reader, name string, size int64, rf *relFile, rfn, seg uint32) error {
	if size%BlockSize != 0 {
		return &PageError{File: name, Block: seg * blocksPerSegment, Msg: fmt.Sprintf("file of %d bytes is not whole %d-byte pages", size, BlockSize)}
	}
	if size/BlockSize > blocksPerSegment {
		return &PageError{File: name, Block: seg * blocksPerSegment, Msg: fmt.Sprintf("file of %d bytes is longer than a 1 GiB segment", size)}
	}
	for i := int64(0); i < size/BlockSize; i++ {
		block := seg*blocksPerSegment + uint32(i)
		if _, err := io.ReadFull(r, w.page); err != nil {
			return fmt.Errorf("relation file %s block %d: reading from the backup archive: %w", name, block, err)
		}
		if err := w.ctx.Err(); err != nil {
			return err
		}
		w.stats.Pages++
		w.stats.Bytes += BlockSize
		if err := w.walkPage(w.page, name, block, rf, rfn); err != nil {
			return err
		}
	}
	return nil
}

// walkPage decides every LP_NORMAL tuple of one page.
func (w *walker) walkPage(b []byte, name string, block uint32, rf *relFile, rfn uint32) error {
	p, isNew, err := ParsePage(b, name, block)
	if err != nil || isNew {
		return err
	}
	if w.cfg.DataChecksums {
		if err := p.VerifyChecksum(name, block); err != nil {
			return err
		}
	}
	for i := 1; i <= p.NumItems(); i++ {
		raw, ok, err := p.Tuple(i, name, block)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		w.stats.Tuples++
		if err := w.tuple(rf, rfn, name, block, i, raw, deferredSource{}); err != nil {
			return err
		}
	}
	return nil
}

// tuple gates one tuple with src and decodes it when visible; a decision
// or TOAST value not available yet spools it.
func (w *walker) tuple(rf *relFile, rfn uint32, file string, block uint32, item int, raw []byte, src statusSource) error {
	_, final := src.(backupSource)
	h, tup, err := decode.PageTuple(raw)
	if err != nil {
		return &PageError{File: file, Block: block, Item: item, Msg: err.Error()}
	}
	vis, err := Visible(h, src)
	if errors.Is(err, errNeedStatus) {
		return w.deferTuple(rf, rfn, block, item, raw)
	}
	if err != nil {
		return &PageError{File: file, Block: block, Item: item, Msg: "visibility: " + err.Error()}
	}
	if !vis {
		w.stats.SkippedInvisible++
		return nil
	}
	t := rf.target
	if rf.toast {
		if err := w.rows.AddToastChunk(t.Toast, tup); err != nil {
			return &PageError{File: file, Block: block, Item: item, Msg: err.Error()}
		}
		return nil
	}
	row, needChunks, err := w.rows.Row(t.Desc, t.DescFrom, tup, w.cfg.LSN)
	if err != nil {
		return &PageError{File: file, Block: block, Item: item, Msg: err.Error()}
	}
	if needChunks {
		if final {
			return &PageError{File: file, Block: block, Item: item, Msg: "the row references a TOAST value whose chunks are not all visible in the backup"}
		}
		return w.deferTuple(rf, rfn, block, item, raw)
	}
	w.stats.Emitted++
	b := append(w.batches[rf.oid], row)
	if len(b) >= emitBatchRows {
		delete(w.batches, rf.oid)
		return w.emit(rf.oid, b)
	}
	w.batches[rf.oid] = b
	return nil
}

func (w *walker) deferTuple(rf *relFile, rfn, block uint32, item int, raw []byte) error {
	w.stats.Deferred++
	s := &w.rowSpool
	if rf.toast {
		s = &w.toastSpool
	}
	return s.add(rfn, block, item, raw)
}

// resolveDeferred decides the spooled tuples with the backup's pg_xact and
// pg_multixact: TOAST chunks first, so every row finds its values.
func (w *walker) resolveDeferred() error {
	src := backupSource{clog: w.clog, multi: w.multi}
	for _, s := range []*spool{&w.toastSpool, &w.rowSpool} {
		err := s.each(func(r spooled) error {
			if err := w.ctx.Err(); err != nil {
				return err
			}
			rf := w.rels[r.rfn]
			if rf == nil {
				return fmt.Errorf("spooled tuple of unknown relfilenode %d", r.rfn)
			}
			file := fmt.Sprintf("base/%d/%d", w.cfg.DbOid, r.rfn)
			if seg := r.block / blocksPerSegment; seg > 0 {
				file += "." + strconv.FormatUint(uint64(seg), 10)
			}
			return w.tuple(rf, r.rfn, file, r.block, r.item, r.tuple, src)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// flushAll emits what is left, by table oid.
func (w *walker) flushAll() error {
	oids := make([]uint32, 0, len(w.batches))
	for oid := range w.batches {
		oids = append(oids, oid)
	}
	sort.Slice(oids, func(i, j int) bool { return oids[i] < oids[j] })
	for _, oid := range oids {
		b := w.batches[oid]
		delete(w.batches, oid)
		if len(b) > 0 {
			if err := w.emit(oid, b); err != nil {
				return err
			}
		}
	}
	return nil
}
