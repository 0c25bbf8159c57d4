// Package walstats computes pg_waldump --stats style statistics over WAL
// segment files: the engine of `walshadow wal stats`.
package walstats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/walshadow/walshadow/internal/wal"
)

// Options tunes a statistics run.
type Options struct {
	// StartLSN: records that start before it are read (the reader must pass
	// through them) but not counted. Zero counts from the first record.
	StartLSN wal.LSN
	// EndLSN: the scan stops at the first record that starts at or after it.
	// Zero reads to the end of the WAL.
	EndLSN wal.LSN
}

// RecordReader yields records: *wal.FileReader and *wal.StreamReader-based
// readers fit. Next returns io.EOF or a wal.KindEndOfWAL error at the end; a
// wal.KindCRC error must leave the reader positioned after the bad record.
type RecordReader interface {
	Next() (*wal.Record, error)
}

// Collect reads the WAL in paths and returns its statistics. Each path is a
// segment file or a directory; a directory stands for its segment files
// (wal.SegmentFiles: names of 24 hex digits in WAL order, plus a
// pg_receivewal ".partial" segment unless the complete segment of that name
// is there too). A named file may also be a ".partial".
//
// Records with a CRC mismatch are counted in Report.CRCFailures and skipped.
// The end of valid WAL ends the scan normally (Report.Stop says where). Any
// other read error is fatal: Collect then returns the report so far, with
// Stop.Reason "error", together with the error. A canceled ctx likewise
// returns the partial report and ctx.Err().
func Collect(ctx context.Context, paths []string, opts Options) (*Report, error) {
	fr, err := wal.NewFileReader(paths...)
	if err != nil {
		return nil, err
	}
	rep, err := CollectRecords(ctx, fr, opts)
	describeFiles(rep, fr)
	return rep, err
}

// CollectRecords is Collect over any record source. File facts (segments,
// timeline, system identifier, segment size) are left zero.
func CollectRecords(ctx context.Context, r RecordReader, opts Options) (*Report, error) {
	a := new(accumulator)
	err := a.run(ctx, r, opts)
	return a.report(), err
}

// accumulator holds the counters. Record types are indexed by rmgr id and
// info nibble, so counting a record is a few array increments, whatever
// the rmgr.
type accumulator struct {
	rmgrs [256]tally
	types [256][16]tally
	total tally

	layout   *wal.Layout
	started  bool
	start    wal.LSN
	end      wal.LSN
	crcCount uint64
	crcLSNs  []LSN
	stop     Stop
}

type tally struct {
	count, recordBytes, fpiCount, fpiBytes uint64
}

func (t *tally) add(recordBytes, fpiCount, fpiBytes uint64) {
	t.count++
	t.recordBytes += recordBytes
	t.fpiCount += fpiCount
	t.fpiBytes += fpiBytes
}

// cancelCheckInterval is how many records pass between looks at ctx: often
// enough to stop within a millisecond or so, rare enough to cost nothing.
const cancelCheckInterval = 1 << 12

func (a *accumulator) run(ctx context.Context, r RecordReader, opts Options) error {
	done := ctx.Done()
	for n := 1; ; n++ {
		if n%cancelCheckInterval == 0 && done != nil {
			select {
			case <-done:
				a.stop = Stop{Reason: StopCanceled, LSN: LSN(a.end), Message: ctx.Err().Error()}
				return ctx.Err()
			default:
			}
		}
		rec, err := r.Next()
		if err != nil {
			if stop := a.classify(err); stop {
				if a.stop.Reason == StopError {
					return fatal(err, a.stop.LSN)
				}
				return nil
			}
			continue
		}
		if rec.LSN < opts.StartLSN {
			continue
		}
		if opts.EndLSN != 0 && rec.LSN >= opts.EndLSN {
			a.stop = Stop{Reason: StopEndLSN, LSN: LSN(a.end)}
			return nil
		}
		a.add(rec)
	}
}

// classify records a reader error; it reports whether the scan must stop.
func (a *accumulator) classify(err error) (stop bool) {
	if errors.Is(err, io.EOF) {
		a.stop = Stop{Reason: StopEndOfInput, LSN: LSN(a.end)}
		return true
	}
	var we *wal.Error
	if !errors.As(err, &we) {
		a.stop = Stop{Reason: StopError, LSN: LSN(a.end), Message: err.Error()}
		return true
	}
	switch we.Kind {
	case wal.KindCRC:
		a.crcCount++
		if len(a.crcLSNs) < MaxCRCFailureLSNs {
			a.crcLSNs = append(a.crcLSNs, LSN(we.LSN))
		}
		return false
	case wal.KindEndOfWAL:
		a.stop = Stop{Reason: StopEndOfWAL, LSN: LSN(we.LSN), Message: we.Msg}
	default:
		a.stop = Stop{Reason: StopError, LSN: LSN(we.LSN), Message: err.Error()}
	}
	return true
}

// fatal returns err so that it names its position: *wal.Error already does.
func fatal(err error, at LSN) error {
	var we *wal.Error
	if errors.As(err, &we) {
		return err
	}
	return fmt.Errorf("reading WAL after %s: %w", at, err)
}

func (a *accumulator) add(rec *wal.Record) {
	if !a.started {
		a.started = true
		a.start = rec.LSN
		a.layout = rec.Layout
	}
	a.end = rec.End
	fpiBytes, fpiCount := rec.FPIBytes()
	recordBytes := uint64(rec.Header.TotLen) - uint64(fpiBytes)
	rmid := rec.Header.RmID
	id := rec.Header.Info >> 4
	if rmid == wal.RmgrXact {
		// XLogRecStoreStats: the xact HAS_INFO bit is a flag, not a type.
		id &= 0x07
	}
	a.rmgrs[rmid].add(recordBytes, uint64(fpiCount), uint64(fpiBytes))
	a.types[rmid][id].add(recordBytes, uint64(fpiCount), uint64(fpiBytes))
	a.total.add(recordBytes, uint64(fpiCount), uint64(fpiBytes))
}

func (t *tally) stats() Stats {
	return Stats{
		Count:         t.count,
		RecordBytes:   t.recordBytes,
		FPICount:      t.fpiCount,
		FPIBytes:      t.fpiBytes,
		CombinedBytes: t.recordBytes + t.fpiBytes,
	}
}

func (a *accumulator) report() *Report {
	rep := &Report{
		StartLSN:       LSN(a.start),
		EndLSN:         LSN(a.end),
		Records:        a.total.count,
		TotalBytes:     a.total.recordBytes + a.total.fpiBytes,
		RecordBytes:    a.total.recordBytes,
		FPICount:       a.total.fpiCount,
		FPIBytes:       a.total.fpiBytes,
		CRCFailures:    a.crcCount,
		CRCFailureLSNs: append([]LSN{}, a.crcLSNs...),
		Stop:           a.stop,
		Rmgrs:          []RmgrStats{},
		RecordTypes:    []RecordTypeStats{},
	}
	if a.layout != nil {
		rep.PGMajor = a.layout.Major
	}
	for rmid := range a.rmgrs {
		if a.rmgrs[rmid].count == 0 {
			continue
		}
		id := wal.RmgrID(rmid)
		rep.Rmgrs = append(rep.Rmgrs, RmgrStats{ID: uint8(rmid), Name: id.String(), Stats: a.rmgrs[rmid].stats()})
		for nib := range a.types[rmid] {
			t := &a.types[rmid][nib]
			if t.count == 0 {
				continue
			}
			info := uint8(nib << 4)
			typ := wal.Identify(a.layout, id, info)
			rep.RecordTypes = append(rep.RecordTypes, RecordTypeStats{
				RmgrID: uint8(rmid), Rmgr: id.String(), Info: info,
				Type: typ, Name: id.String() + "/" + typ, Stats: t.stats(),
			})
		}
	}
	return rep
}

// describeFiles adds what the file reader knows about the segments read.
func describeFiles(rep *Report, fr *wal.FileReader) {
	files := fr.Files()
	if cur := fr.CurrentFile(); cur != "" {
		rep.FirstSegment = filepath.Base(files[0])
		rep.LastSegment = filepath.Base(cur)
		for i, f := range files {
			if f == cur {
				rep.SegmentsRead = i + 1
				break
			}
		}
	}
	if sr := fr.Stream(); sr != nil {
		rep.Timeline = sr.Timeline()
		rep.SystemIdentifier = sr.SystemID()
		rep.SegmentSize = sr.SegmentSize()
		if rep.PGMajor == 0 && sr.Layout() != nil {
			rep.PGMajor = sr.Layout().Major
		}
	}
}
