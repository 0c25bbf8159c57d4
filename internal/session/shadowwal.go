package session

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/walshadow/walshadow/internal/filter"
	"github.com/walshadow/walshadow/internal/fsutil"
	"github.com/walshadow/walshadow/internal/shadow"
	"github.com/walshadow/walshadow/internal/statefile"
	"github.com/walshadow/walshadow/internal/wal"
)

// filterBootstrapWAL runs filterShadowWAL unless the state directory's
// marker says it was done for this very bootstrap, and writes the marker
// once it is (every segment it rewrote is synced by then): the bootstrap's
// segments never change again, so refiltering them at every start (tens of
// megabytes read, parsed and compared) is wasted.
func (s *Session) filterBootstrapWAL(ctx context.Context, boot *shadow.BootstrapResult, segSize uint32) error {
	marker := statefile.StateDir(s.cfg.StateDir).ShadowWALFiltered()
	want := bootstrapMarker(boot)
	if got, err := os.ReadFile(marker); err == nil && string(got) == want {
		return nil
	}
	if err := filterShadowWAL(ctx, filepath.Join(s.shadowDir(), "pg_wal"), boot, segSize); err != nil {
		return fmt.Errorf("filtering the shadow's WAL: %w", err)
	}
	if err := fsutil.WriteFileAtomic(marker, []byte(want), 0o600, nil); err != nil {
		return fmt.Errorf("recording that the shadow's WAL is filtered: %w", err)
	}
	return nil
}

// bootstrapMarker names a bootstrap: its source, timeline and backup
// positions (a new bootstrap never has them all alike).
func bootstrapMarker(boot *shadow.BootstrapResult) string {
	return fmt.Sprintf("system %d timeline %d backup %s-%s wal_end %s\n", boot.SystemID, boot.Timeline, boot.StartLSN, boot.EndLSN, boot.WALEnd)
}

// filterShadowWAL rewrites, in place, every user-data record in the WAL
// segments of the shadow's pg_wal as a same-length XLOG_NOOP, exactly as the
// live stream is filtered. The backup window's WAL arrives unfiltered with
// the BASE_BACKUP; replaying its user records would need user pages the
// shadow does not have. Already-filtered WAL passes unchanged, so this is
// safe to run at every start (the shadow must be stopped).
//
// Only the bootstrap's segments (below boot.WALEnd) are read: every later
// one came filtered, from walshadow's walsender or its archive. Whatever
// segment pg_wal starts with may open with the continuation of a record
// whose beginning the shadow already removed (a restartpoint removes the
// segments before its redo point, e.g. at the shadow's shutdown): those
// bytes stay as they are, being the shadow's own copy (filtered when
// published, or older than anything it replays), and filtering goes on
// from the first record that starts there.
func filterShadowWAL(ctx context.Context, walDir string, boot *shadow.BootstrapResult, segSize uint32) error {
	files, err := wal.SegmentFiles(walDir)
	if err != nil {
		return err
	}
	var segs []string
	var first wal.LSN
	for _, f := range files {
		n, ok := wal.ParseSegmentName(filepath.Base(f))
		if !ok || n.Partial || n.TLI != boot.Timeline {
			continue
		}
		start, err := n.StartLSN(segSize)
		if err != nil {
			return err
		}
		if boot.WALEnd != 0 && start >= boot.WALEnd {
			break // streamed after the bootstrap: filtered already
		}
		if len(segs) == 0 {
			first = start
		} else if start != first+wal.LSN(len(segs))*wal.LSN(segSize) {
			break // a gap: what follows is not contiguous WAL (recycled segments)
		}
		segs = append(segs, f)
	}
	if len(segs) == 0 {
		return nil
	}
	f := filter.New(filter.Config{DbOid: boot.FollowedDBOID})
	shadowDir := filepath.Dir(walDir)
	if err := seedFromShadowDir(f.Tracker(), shadowDir, boot.RelocatedCatalogs); err != nil {
		return err
	}
	sink := &walFileSink{dir: walDir, tli: boot.Timeline, segSize: segSize, dirty: map[wal.LSN]bool{}}
	dec := &noHoldDecider{inner: filterDecider{f}, sink: sink, segSize: segSize}
	p, err := NewPump(first, PumpConfig{SegmentSize: segSize, KeepStartContinuation: true}, dec, nopFeed{}, sink, nil)
	if err != nil {
		return err
	}
	for _, path := range segs {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if len(data) != int(segSize) {
			break
		}
		if err := p.Feed(ctx, data); err != nil {
			if wal.IsKind(err, wal.KindEndOfWAL) {
				break // the rest of pg_wal is not written WAL yet
			}
			return fmt.Errorf("filtering %s: %w", filepath.Base(path), err)
		}
	}
	return p.flushTail(sink.WriteSegment)
}

// noHoldDecider filters without holds or batches, and marks the segments a
// NOOP rewrite touches so only those are written back.
type noHoldDecider struct {
	inner   filterDecider
	sink    *walFileSink
	segSize uint32
}

func (d *noHoldDecider) Decide(rec *wal.Record) (Decision, error) {
	dec, err := d.inner.Decide(rec)
	if dec.Noop {
		d.sink.dirty[rec.LSN-rec.LSN%wal.LSN(d.segSize)] = true
		d.sink.dirty[(rec.End-1)-(rec.End-1)%wal.LSN(d.segSize)] = true
	}
	return Decision{Noop: dec.Noop}, err
}

func (d *noHoldDecider) NoopRecord(dst []byte, rec *wal.Record) ([]byte, error) {
	return d.inner.NoopRecord(dst, rec)
}

type nopFeed struct{}

func (nopFeed) Publish(wal.LSN, []byte)                  {}
func (nopFeed) WaitApply(context.Context, wal.LSN) error { return nil }
func (nopFeed) MemoryFloor() wal.LSN                     { return wal.LSN(math.MaxUint64) }

// walFileSink writes rewritten segments back over their files in pg_wal,
// keeping the files' owner and mode.
type walFileSink struct {
	dir     string
	tli     uint32
	segSize uint32
	dirty   map[wal.LSN]bool
}

func (s *walFileSink) WriteSegment(start wal.LSN, data []byte) error {
	if !s.dirty[start] {
		return nil
	}
	delete(s.dirty, start)
	seg := uint64(start) / uint64(s.segSize)
	perLog := uint64(0x100000000) / uint64(s.segSize)
	name := fmt.Sprintf("%08X%08X%08X", s.tli, seg/perLog, seg%perLog)
	f, err := os.OpenFile(filepath.Join(s.dir, name), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
