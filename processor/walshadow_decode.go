// Package processor registers the walshadow_decode Benthos processor: it
// turns the pg_physical_wal input's committed transactions into one message
// per row change (and per schema event), decoded with the relation shape in
// force at each record's LSN.
//
// The input emits each committed transaction whole: its commit record
// first, then its row changes merged by LSN, the last one flagged. The
// session captures every catalog boundary into its descriptor log inside a
// short hold, as soon as the shadow reaches it; at a boundary's commit the
// processor emits the schema events stored for it, then decodes the
// transaction's rows against the log as it stood at that commit. A
// transaction may span several batches: the decoder's state (TOAST chunks,
// speculative inserts, failed tables) is carried between them, and batches
// are processed strictly in the session's sequence even with
// pipeline.threads above 1.
//
// Every row message carries the change's physical identity (MetaTID,
// MetaOldTID for updates, MetaFilenode), which is all a table without a
// usable replica identity is known by. A change that cannot be decoded
// exactly fails its table alone: a message with operation OperationFail
// and the reason in MetaError replaces it, the table's later changes in
// the transaction are dropped, and the other tables go on. Only what
// threatens every table (a record that does not parse, a source not at
// wal_level logical, the descriptor log or the shadow's bridge failing as
// a whole) stops the session.
package processor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/config"
	"github.com/walshadow/walshadow/internal/batchdecode"
	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/msg"
	"github.com/walshadow/walshadow/internal/session"
)

const (
	fieldToast         = "toast"
	fieldMaxValueBytes = "max_value_bytes"
	fieldMetadata      = "metadata"

	metadataRouting = "routing"
	metadataAll     = "all"

	fieldMessages = "messages"
	messagesRow   = "row"
	messagesBatch = "batch"

	toastOmit = "omit"
	toastFail = "fail"
)

func decodeSpec() *service.ConfigSpec {
	return service.NewConfigSpec().
		Beta().
		Categories("Parsing").
		Summary("Decodes a walshadow session's committed transactions into one message per row change, with each relation's shape as it was at the change, and schema events before the rows that depend on them.").
		Description(`
Place it right after the ` + "`pg_physical_wal`" + ` input of the same session.

Each row change becomes one message whose payload is a structured object,
column name to value (NULL as null; bool; int2/int4/int8/oid as integers;
float4/float8 as numbers, NaN and infinities as the strings PostgreSQL
prints; numeric as an exact JSON number, NaN and infinities as strings;
date/timestamp/timestamptz as timestamps when the year is 1..9999, else
PostgreSQL's text; bytea as bytes; everything else as PostgreSQL's own text
output under TimeZone UTC and DateStyle ISO — types walshadow does not decode
itself, such as jsonb, arrays, enums, ranges and extension types, are
rendered by the shadow's bridge, so set ` + "`shadow.bridge_library_dir`" + `).

Metadata: ` + "`walshadow_change`" + ` holds all of it as one typed value, what the
` + "`clickhouse_ddl`" + ` output reads. As strings, every row change carries the
routing keys ` + "`walshadow_operation`" + `, ` + "`walshadow_schema`" + `, ` + "`walshadow_table`" + `,
` + "`walshadow_lsn`" + ` and ` + "`walshadow_commit_lsn`" + `; with ` + "`metadata: all`" + ` (and on
every schema event, truncate and failure) it carries all of these: ` + "`walshadow_operation`" + ` (insert, update, delete, truncate, schema, fail),
` + "`walshadow_schema`" + `, ` + "`walshadow_table`" + `, ` + "`walshadow_relation_oid`" + `,
` + "`walshadow_lsn`" + ` (the change's own LSN: its version), ` + "`walshadow_commit_lsn`" + `,
` + "`walshadow_xid`" + `, ` + "`walshadow_commit_time`" + `, ` + "`walshadow_descriptor_version`" + `,
` + "`walshadow_key`" + ` (the replica identity's columns), ` + "`walshadow_record_index`" + `
(the change's position among the changes of its WAL record: a multi-insert's
rows, an update's delete and insert halves), and on an update whose
unchanged TOASTed columns were left out, ` + "`walshadow_unchanged_toast`" + `.

Every insert, update and delete also carries its physical row identity:
` + "`walshadow_tid`" + ` (` + "`block:offset`" + `, decimal, e.g. ` + "`0:1`" + `) is the tuple the
change leaves live — the inserted tuple, the new version of an update, the
deleted tuple, and for the delete half of a key change the old version;
` + "`walshadow_old_tid`" + ` (same format, updates only) is the version an update
replaced; ` + "`walshadow_filenode`" + ` (decimal) is the relfilenode of the heap the
change was written to, the table's storage generation, which TRUNCATE,
VACUUM FULL, CLUSTER and rewrites change.

A delete carries the old key (the whole old row under REPLICA IDENTITY
FULL); a table without a usable replica identity (REPLICA IDENTITY NOTHING,
or DEFAULT without a primary key) has no key to log, so its deletes carry no
columns and its updates the new row only, and ` + "`walshadow_filenode`" + ` with the
TIDs says which row changed. An update that changes the key is a delete of the old key followed by
the update, both flagged ` + "`walshadow_key_changed`" + `: PostgreSQL logs only the
old key, so a consumer carries the update's unchanged TOAST columns over
from the row the delete retired. Under REPLICA IDENTITY FULL every update is
such a pair. Schema events (` + "`walshadow_event`" + ` added, changed, dropped,
truncate) describe the relation and, for changed, what changed: columns
added, dropped, renamed or retyped, the key, the relation's own name
(` + "`relation_renamed`" + `) and LOGGED/UNLOGGED (` + "`persistence_changed`" + `).

Decoding fails closed, per table: a change it cannot decode exactly — a
record inside an ambiguity interval of the descriptor log, a TOAST value
missing (an inserted row's, or an unchanged one under ` + "`toast: fail`" + `),
inconsistent or larger than ` + "`max_value_bytes`" + `, a datum that does not decode,
a value the shadow's bridge cannot render, a DELETE without the key its
replica identity promises — becomes a message with ` + "`walshadow_operation`" + `
fail, an empty payload, ` + "`walshadow_error`" + ` saying why (naming the LSN,
relation and column), and the relation, LSN, transaction and descriptor
version metadata of a row change. That table's later changes in the same
transaction are dropped (they would apply to an unknown state) and the
other tables' changes go on; the table needs a reload. What threatens every
table — a record that does not parse, a source not at wal_level logical,
the descriptor log unable to answer, the shadow's bridge unreachable or not
configured — stops the session with an error naming the record; nothing
past it is acknowledged.`).
		Field(service.NewStringField(config.FieldSession).
			Description("Label of the `walshadow` resource (the source session) whose records this processor receives.").
			Example("main")).
		Field(service.NewStringEnumField(fieldToast, toastOmit, toastFail).
			Description("What an UPDATE whose TOASTed column did not change (its value is not in the WAL) does: `omit` leaves the column out of the message so the stored value stays; `fail` fails the table (a `fail` message).").
			Default(toastOmit).Advanced()).
		Field(service.NewIntField(fieldMaxValueBytes).
			Description("Largest single value (after TOAST reassembly and decompression) the processor accepts; a larger one fails its table (a `fail` message).").
			Default(1 << 30).Advanced()).
		Field(service.NewStringEnumField(fieldMetadata, metadataRouting, metadataAll).
			Description("Which metadata a row change carries as strings besides the typed `walshadow_change`: `routing` (operation, schema, table, LSN, commit LSN) or `all` (every key above: a map insert each per row, which costs throughput). A mapping that reads any other key per row needs `all`. The output reads the typed value: to send rows elsewhere, configure the output, not the metadata.").
			Default(metadataRouting).Advanced()).
		Field(service.NewStringEnumField(fieldMessages, messagesRow, messagesBatch).
			Description("`row`: one message per row change and schema event, as described above. `batch`: everything one input batch decodes to as a single message (the changes under `walshadow_changes`, typed, with their payloads; `walshadow_seq` and `walshadow_epoch` as strings; an empty payload), which spares a message, a metadata map and the routing strings per row. Only `clickhouse_ddl` reads a batch message: place it right after this processor, with no processor between (`walshadow run` refuses a config that does not, and the output a batch message a processor wrote to). `metadata: all` implies `row`.").
			Default(messagesRow).Advanced())
}

func init() {
	err := service.RegisterBatchProcessor("walshadow_decode", decodeSpec(),
		func(conf *service.ParsedConfig, mgr *service.Resources) (service.BatchProcessor, error) {
			label, err := conf.FieldString(config.FieldSession)
			if err != nil {
				return nil, err
			}
			toast, err := conf.FieldString(fieldToast)
			if err != nil {
				return nil, err
			}
			maxValue, err := conf.FieldInt(fieldMaxValueBytes)
			if err != nil {
				return nil, err
			}
			var sess *session.Session
			err = mgr.AccessCustomResource(context.Background(), config.ResourceType, label, func(v any) {
				sess, _ = v.(*session.Session)
			})
			if err != nil || sess == nil {
				return nil, fmt.Errorf("%s: no %s resource labelled %q: %v", config.FieldSession, config.ResourceType, label, err)
			}
			opts := decode.TxOptions{MaxValueBytes: maxValue}
			if toast == toastFail {
				opts.ToastPolicy = decode.ToastFail
			}
			meta, err := conf.FieldString(fieldMetadata)
			if err != nil {
				return nil, err
			}
			messages, err := conf.FieldString(fieldMessages)
			if err != nil {
				return nil, err
			}
			p := newDecodeProcessor(sess, mgr, opts)
			p.allMeta = meta == metadataAll
			p.batchMessages = messages == messagesBatch && !p.allMeta
			return p, nil
		})
	if err != nil {
		panic(err)
	}
}

type decodeProcessor struct {
	sess *session.Session
	log  *service.Logger
	m    *decodeMetrics
	// allMeta sets every metadata key of a row change as a string;
	// batchMessages sends a batch's changes as one message.
	allMeta       bool
	batchMessages bool

	// identityNoted: the identity note last logged per relation, so each
	// is said once (not again at every schema event of the table).
	identityMu    sync.Mutex
	identityNoted map[uint32]string

	// turn orders batches by (epoch, seq): changed is closed and replaced
	// whenever it moves.
	turnMu  sync.Mutex
	epoch   uint64
	next    uint64
	changed chan struct{}

	// dec decodes the batches, in turn; preflown: the identity notes of the
	// tables at the start were logged.
	dec      *batchdecode.Decoder
	preflown bool
	text     textCache   // the schema events'
	rowText  []textCache // the rows', one per pool worker
}

func newDecodeProcessor(sess *session.Session, mgr *service.Resources, opts decode.TxOptions) *decodeProcessor {
	p := &decodeProcessor{sess: sess, log: mgr.Logger(), m: newDecodeMetrics(mgr.Metrics()), changed: make(chan struct{})}
	p.dec = batchdecode.New(sess, opts, 0, batchdecode.Observer{
		BoundaryWait: func(d time.Duration) { p.m.boundaryWait.Incr(d.Nanoseconds()) },
		Transaction: func(s decode.TxStats) {
			p.m.observeTx(s)
			p.m.transactions.Incr(1)
		},
		BridgeValues: func(n int) { p.m.bridgeValues.Incr(int64(n)) },
		Debugf:       p.log.Debugf,
	})
	return p
}

// errRedelivered: Benthos delivered a batch again after a nack. The
// decoder's state has moved past it, so the session restarts from its
// durable resume point instead.
var errRedelivered = errors.New("a batch was delivered to walshadow_decode again after a nack; restarting the session from its resume point")

func (p *decodeProcessor) ProcessBatch(ctx context.Context, batch service.MessageBatch) ([]service.MessageBatch, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	epoch, seq, err := batchPosition(batch[0])
	if err != nil {
		return nil, err
	}
	stale, err := p.waitTurn(ctx, epoch, seq)
	if err != nil || stale {
		return nil, err
	}
	defer p.advance(epoch, seq)

	out, err := p.decodeBatch(ctx, batch, epoch, seq)
	if err != nil {
		// Nothing acknowledged after this counts: the session stops and
		// resumes from its durable state, and the error names the record.
		p.sess.Fail(err)
		p.resetTx()
		p.m.failures.Incr(1)
		return nil, err
	}
	if len(out) == 0 {
		return nil, nil
	}
	return []service.MessageBatch{out}, nil
}

// batchPosition is the session run and batch a message came in (the
// record batch, the typed record, else its strings).
func batchPosition(m *service.Message) (epoch, seq uint64, err error) {
	if rs, ok := msg.RecordsOf(m); ok {
		return rs.Epoch, rs.Seq, nil
	}
	r, err := msg.RecordOf(m)
	if err != nil {
		return 0, 0, fmt.Errorf("walshadow_decode needs the pg_physical_wal input's messages (is it placed right after the input?): %w", err)
	}
	return r.Epoch, r.Seq, nil
}

// waitTurn blocks until (epoch, seq) is the next batch to process. A batch
// of an older run is stale (dropped: its run's acknowledgements no longer
// count); a batch seen again is a redelivery (the session restarts).
func (p *decodeProcessor) waitTurn(ctx context.Context, epoch, seq uint64) (stale bool, err error) {
	for {
		p.turnMu.Lock()
		switch {
		case epoch > p.epoch:
			// A new run of the session: its batches start at 1 and the
			// transaction in progress (if any) is re-read from the floor.
			p.epoch, p.next = epoch, 1
			p.resetTx()
			p.bump()
			p.turnMu.Unlock()
			continue
		case epoch < p.epoch:
			p.turnMu.Unlock()
			return true, nil
		case seq < p.next:
			p.turnMu.Unlock()
			p.sess.Fail(errRedelivered)
			return false, errRedelivered
		case seq == p.next:
			p.turnMu.Unlock()
			return false, nil
		}
		ch := p.changed
		p.turnMu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(time.Second):
			// Re-check: a new epoch may have started without this batch's
			// predecessor ever arriving.
			if p.sess.Epoch() > epoch {
				return true, nil
			}
		}
	}
}

// bump wakes waiters; turnMu held.
func (p *decodeProcessor) bump() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *decodeProcessor) advance(epoch, seq uint64) {
	p.turnMu.Lock()
	if p.epoch == epoch && p.next == seq {
		p.next++
		p.bump()
	}
	p.turnMu.Unlock()
}

func (p *decodeProcessor) resetTx() { p.dec.Reset() }

func (p *decodeProcessor) Close(ctx context.Context) error { return nil }
