package session

import (
	"github.com/walshadow/walshadow/internal/filter"
	"github.com/walshadow/walshadow/internal/wal"
)

// filterDecider adapts the filter to the pump.
type filterDecider struct{ f *filter.Filter }

func (d filterDecider) Decide(rec *wal.Record) (Decision, error) {
	fd, err := d.f.Decide(rec)
	if err != nil {
		return Decision{}, err
	}
	out := Decision{
		Noop:               fd.Route == filter.RouteNoop,
		DeferCatalogDecode: fd.DeferCatalogDecode,
	}
	// The processor gets row changes and everything that ends or shapes a
	// transaction.
	// TRUNCATE names relations by oid and has no block: the shadow replays
	// it (it is no user data), and the processor fans it out.
	out.ToDecoder = out.Noop || rec.Header.RmID == wal.RmgrXact ||
		rec.Header.RmID == wal.RmgrHeap && rec.Header.Info&wal.XLogHeapOpMask == wal.XLogHeapTruncate
	if b := fd.Boundary; b != nil {
		out.Boundary = &Boundary{
			NextLSN:           b.NextLSN,
			DrainXID:          b.DrainXID,
			AffectedOids:      append([]uint32(nil), b.AffectedOids...),
			FirstCatalogTouch: b.FirstCatalogTouch,
			CaptureAll:        b.CaptureAll,
		}
	}
	return out, nil
}

func (filterDecider) NoopRecord(dst []byte, rec *wal.Record) ([]byte, error) {
	return filter.NoopRecord(dst, rec.Header.TotLen, rec.Header.XID, rec.Header.Prev)
}
