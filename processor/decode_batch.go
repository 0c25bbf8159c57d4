package processor

import (
	"context"
	"fmt"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/batchdecode"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/msg"
)

// decodeBatch decodes one input batch (internal/batchdecode) and builds
// its messages.
func (p *decodeProcessor) decodeBatch(ctx context.Context, batch service.MessageBatch, epoch, seq uint64) (service.MessageBatch, error) {
	if !p.preflown {
		p.preflown = true
		p.preflight()
	}
	recs, err := records(batch)
	if err != nil {
		return nil, err
	}
	b, err := p.dec.Decode(ctx, recs, epoch, seq)
	if err != nil {
		return nil, err
	}
	for i := range b.Events {
		p.warnIdentity(b.Events[i].Event.Desc)
	}
	msgs := p.messages(b)
	p.dec.Recycle(b)
	return msgs, nil
}

// records reads a batch's records, whichever form the input sent them in
// (msg.EachRecord).
func records(batch service.MessageBatch) ([]batchdecode.Record, error) {
	n := len(batch) // one record a message, or one record batch
	if n == 1 {
		if rs, ok := msg.RecordsOf(batch[0]); ok {
			n = len(rs.Records)
		}
	}
	recs := make([]batchdecode.Record, 0, n)
	err := msg.EachRecord(batch, func(r *msg.Record, raw []byte, boundary bool) error {
		recs = append(recs, batchdecode.Record{Meta: r, Raw: raw, Boundary: boundary})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walshadow_decode needs the pg_physical_wal input's messages (is it placed right after the input?): %w", err)
	}
	return recs, nil
}

// preflight reports, once, the tables without a usable replica identity:
// their UPDATEs and DELETEs are replicated by physical row identity.
func (p *decodeProcessor) preflight() {
	log := p.sess.DescLog()
	if log == nil {
		return
	}
	for _, d := range log.ActivePresent() {
		p.warnIdentity(d)
	}
}

// warnIdentity tells, at info level, that a table without a usable replica
// identity is replicated by physical row identity. Temporary and unlogged
// tables write no WAL: nothing is said about them.
func (p *decodeProcessor) warnIdentity(d *desclog.Descriptor) {
	note, ok := identityNote(d)
	if !ok {
		return
	}
	p.identityMu.Lock()
	defer p.identityMu.Unlock()
	if p.identityNoted[d.Oid] == note {
		return
	}
	if p.identityNoted == nil {
		p.identityNoted = map[uint32]string{}
	}
	p.identityNoted[d.Oid] = note
	p.log.Info(note)
}

// identityNote is warnIdentity's message for d, if it gets one.
func identityNote(d *desclog.Descriptor) (string, bool) {
	if d == nil || (d.Kind != 'r' && d.Kind != 'p') || hasIdentity(d) || d.Persistence == 't' || d.Persistence == 'u' {
		return "", false
	}
	return fmt.Sprintf("table %s.%s (oid %d) has no usable replica identity (REPLICA IDENTITY %s): its UPDATEs and DELETEs are replicated by physical row identity (%s and %s)",
		d.Namespace, d.Name, d.Oid, identityName(d.ReplIdent), MetaFilenode, MetaTID), true
}

func hasIdentity(d *desclog.Descriptor) bool {
	return d.ReplIdent == 'f' || len(d.KeyAttnums) > 0
}

func identityName(c byte) string {
	switch c {
	case 'd':
		return "DEFAULT without a primary key"
	case 'n':
		return "NOTHING"
	case 'f':
		return "FULL"
	case 'i':
		return "USING INDEX"
	}
	return string(c)
}
