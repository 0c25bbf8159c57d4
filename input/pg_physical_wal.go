// Package input registers the pg_physical_wal Benthos input and the
// walshadow custom resource (one source session) it reads from.
package input

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/config"
	"github.com/walshadow/walshadow/internal/msg"
	"github.com/walshadow/walshadow/internal/session"
	"github.com/walshadow/walshadow/internal/wal"
)

// Metadata keys set on every message (one message per WAL record): what
// internal/msg names, under the input's historical Go names.
const (
	MetaRecord     = msg.KeyRecord
	MetaLSN        = msg.KeyWALLSN
	MetaNextLSN    = msg.KeyWALNextLSN
	MetaXID        = msg.KeyWALXID
	MetaTopXID     = msg.KeyWALTopXID
	MetaRmgr       = msg.KeyWALRmgr
	MetaRecordType = msg.KeyWALRecordType
	MetaPGMajor    = msg.KeyPGMajor
	MetaDeferred   = msg.KeyDeferred
	MetaBoundary   = msg.KeyBoundary

	// Transaction metadata: every message belongs to one committed
	// transaction, emitted whole and in commit order.
	MetaCommitLSN  = msg.KeyCommitLSN
	MetaCommitNext = msg.KeyCommitNextLSN
	MetaTxTopXID   = msg.KeyTopXID
	MetaCommitTime = msg.KeyCommitTime
	MetaTxLast     = msg.KeyTxLast
	MetaTxFirstLSN = msg.KeyTxFirstLSN
	MetaSeq        = msg.KeySeq
	MetaEpoch      = msg.KeyEpoch
)

// fieldMetadata chooses the metadata set on each message, fieldMessages
// whether a message carries a record or a whole batch.
const (
	fieldMetadata = "metadata"
	metadataTyped = "typed"
	metadataAll   = "all"

	fieldMessages  = "messages"
	messagesBatch  = "batch"
	messagesRecord = "record"
)

func inputSpec() *service.ConfigSpec {
	return service.NewConfigSpec().
		Beta().
		Categories("Services").
		Summary("Streams a PostgreSQL source's physical WAL (a physical replication slot, no logical decoding) through a walshadow session, and emits the records of committed transactions, whole and in commit order.").
		Description(`
By default (`+"`messages: batch`"+`) each message is a whole batch of records, as
one typed value under `+"`walshadow_wal_records`"+` (with `+"`walshadow_seq`"+` and
`+"`walshadow_epoch`"+` as strings) and an empty payload: what `+"`walshadow_decode`"+`
reads, at the cost of one message per batch. With `+"`messages: record`"+` each
message is one WAL record, described below, for pipelines that look at the
records themselves.

A record message's payload is the record's bytes exactly as
the source wrote them. Row changes are buffered per transaction inside the
session (spilling to `+"`state_dir/spill`"+` past `+"`transaction_buffer_bytes`"+`) and
come out at their commit: the commit record first, then every row change of
the transaction tree merged by LSN; aborted work and rolled-back savepoints
never come out. A large transaction spans several batches.

Metadata: `+"`walshadow_wal_record`"+` holds all of it as one typed value, what
`+"`walshadow_decode`"+` reads (and `+"`walshadow_boundary`"+` is always set). With `+"`metadata: all`"+` every
value is set as a string too, for mappings and logs:

- `+"`wal_lsn`"+`, `+"`wal_next_lsn`"+`: where the record starts, and where the next one does (PostgreSQL's EndRecPtr).
- `+"`wal_xid`"+`, `+"`wal_top_xid`"+`: the (sub)transaction id, and the top-level one when the record names it.
- `+"`wal_rmgr`"+`, `+"`wal_record_type`"+`: e.g. Heap / INSERT, Transaction / COMMIT.
- `+"`pg_major`"+`: the source's PostgreSQL major version.
- `+"`walshadow_commit_lsn`"+`, `+"`walshadow_commit_next_lsn`"+`, `+"`walshadow_top_xid`"+`, `+"`walshadow_commit_time`"+`, `+"`walshadow_tx_first_lsn`"+`: the transaction the record belongs to; `+"`walshadow_tx_last`"+` flags its last record.
- `+"`walshadow_defer_catalog_decode`"+`: the record's transaction changed catalogs before it.
- `+"`walshadow_boundary`"+` (structured, on a commit record): a catalog-changing commit. The session held the shadow exactly there and captured the new shapes into its descriptor log; `+"`walshadow_decode`"+` emits them as schema events.
- `+"`walshadow_seq`"+`, `+"`walshadow_epoch`"+`: the batch's sequence number within the session's run, and the run.

The resume point never passes the first record of a transaction not yet
acknowledged downstream, and a restart skips transactions already
acknowledged. Keep `+"`pipeline.threads: 1`"+` where order matters.

When the session stops (a batch refused downstream, the source or the shadow
lost, ...) or cannot start, the input restarts it from its resume point. It
waits 1 s before the first restart and doubles the wait, up to 30 s, for as
long as the restarts make no progress, i.e. until a run delivers past what had
been delivered when the previous one stopped. Each stop is logged once; an
error that keeps recurring is logged as one short "still failing" line per
restart, with its count.`).
		Field(service.NewStringField(config.FieldSession).
			Description("Label of the `walshadow` resource (the source session) to read.").
			Example("main")).
		Field(service.NewStringEnumField(fieldMetadata, metadataTyped, metadataAll).
			Description("`typed`: the typed record value; `all`: every metadata key as a string as well (a map insert each per record, which costs throughput).").
			Default(metadataTyped).
			Advanced()).
		Field(service.NewStringEnumField(fieldMessages, messagesBatch, messagesRecord).
			Description("`batch`: one message per batch, the records as one typed value (the fastest; what `walshadow_decode` reads); `record`: one message per WAL record, its bytes as the payload (for mappings and logs of the records; `metadata: all` implies it).").
			Default(messagesBatch).
			Advanced()).
		Example("Minimal", "Stream a source and drop the records (a smoke test of the session).", `
walshadow:
  - label: main
    source_dsn: ${PG_SOURCE_DSN}
    state_dir: ${WALSHADOW_STATE_DIR:./var/walshadow}

input:
  pg_physical_wal:
    session: main

output:
  drop: {}
`)
}

func init() {
	env := service.GlobalEnvironment()
	if err := env.RegisterCustomResource(config.ResourceType, config.SessionSpec(), newSessionResource); err != nil {
		panic(err)
	}
	if err := env.RegisterBatchInput("pg_physical_wal", inputSpec(), newInput); err != nil {
		panic(err)
	}
}

func newSessionResource(conf *service.ParsedConfig, mgr *service.Resources) (any, error) {
	cfg, err := config.ParseSession(conf)
	if err != nil {
		return nil, err
	}
	return session.New(cfg, mgr.Logger(), mgr.Metrics()), nil
}

type physicalWALInput struct {
	label string
	// allMeta sets every metadata key as a string (metadata: all).
	allMeta bool
	// batchMessages: one message per batch (messages: batch).
	batchMessages bool
	mgr           *service.Resources
	sess          sessionReader

	// Connect and ReadBatch run on one goroutine; mu guards the restart
	// state all the same.
	mu sync.Mutex
	// restarts backs off consecutive stops without progress (1 s doubling
	// to 30 s, staying there), so a failure that recurs at the same record
	// does not restart the session every second; failures words the one
	// line logged per stop; wait is what the next Connect waits first.
	restarts restartPolicy
	failures failureLog
	wait     time.Duration
	// sleep waits out a back-off; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
}

// sessionReader is what the input uses of its session (a *session.Session;
// tests fake it).
type sessionReader interface {
	Attach(reader any)
	Start(ctx context.Context) error
	Next(ctx context.Context) (*session.Batch, error)
	Ack(b *session.Batch)
	Fail(err error)
	Epoch() uint64
	Delivered() wal.LSN
}

// sleep waits d, or less if ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func newInput(conf *service.ParsedConfig, mgr *service.Resources) (service.BatchInput, error) {
	label, err := conf.FieldString(config.FieldSession)
	if err != nil {
		return nil, err
	}
	allMeta, batchMessages, err := messageForm(conf)
	if err != nil {
		return nil, err
	}
	in := &physicalWALInput{label: label, allMeta: allMeta, batchMessages: batchMessages,
		mgr: mgr, restarts: newRestartPolicy(), sleep: sleep}
	var sess *session.Session
	err = mgr.AccessCustomResource(context.Background(), config.ResourceType, label, func(v any) {
		sess, _ = v.(*session.Session)
	})
	if err != nil || sess == nil {
		return nil, fmt.Errorf("%s: no %s resource labelled %q: %v", config.FieldSession, config.ResourceType, label, err)
	}
	in.sess = sess
	// A nacked batch is not delivered again as it was: the session restarts
	// from its durable resume point (nothing past the resume floor is lost)
	// and streams it again in a new run, decoder state rebuilt. Replaying
	// the same batch instead would meet a decoder that has moved past it.
	return in, nil
}

// Connect starts the session, or restarts it after a stop. It retries a
// failed start itself, backing off as restarts do, so each failure is
// logged once here (Benthos would log every failed Connect, once per
// retry), and returns only once the session runs, the input is closing, or
// the failure is one no restart can cure.
func (in *physicalWALInput) Connect(ctx context.Context) error {
	for {
		in.mu.Lock()
		wait := in.wait
		in.wait = 0
		in.mu.Unlock()
		if wait > 0 {
			if err := in.sleep(ctx, wait); err != nil {
				return err
			}
		}
		// A new input on a running session is a config reload (walshadow
		// run -w): the old pipeline's batches are gone with it, so the
		// session resumes from its durable state rather than continue
		// mid-run.
		in.sess.Attach(in)
		err := in.sess.Start(ctx)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, session.ErrClosed):
			return service.ErrEndOfInput
		case ctx.Err() != nil:
			return ctx.Err()
		case session.IsPermanent(err):
			// Retrying cannot help and would repeat the same line
			// forever: say it once and stop, nothing having been written.
			in.mgr.Logger().Errorf("walshadow cannot start: %v", err)
			exitProcess(1)
			return err
		}
		in.stopped(err, true)
	}
}

// stopped reports a stop of the session (a run that stopped, or a start
// that failed): it decides the wait before the next start and logs the one
// line for it.
func (in *physicalWALInput) stopped(err error, starting bool) {
	msg := strings.TrimPrefix(err.Error(), session.ErrStopped.Error()+": ")
	pos := in.sess.Delivered()
	in.mu.Lock()
	d := in.restarts.stopped(pos)
	if d.Progress {
		in.failures.reset()
	}
	in.wait = d.Wait
	line := in.failures.line(time.Now(), msg, starting, d.Streak, d.Wait)
	in.mu.Unlock()
	in.mgr.Logger().Error(line)
}

// messageForm reads what the messages carry: every metadata string
// (metadata: all), and one message per batch (messages: batch, unless
// metadata: all asks for the strings of each record).
func messageForm(conf *service.ParsedConfig) (allMeta, batch bool, err error) {
	meta, err := conf.FieldString(fieldMetadata)
	if err != nil {
		return false, false, err
	}
	messages, err := conf.FieldString(fieldMessages)
	if err != nil {
		return false, false, err
	}
	if meta == metadataAll {
		return true, false, nil // (a batch message carries no per-record strings)
	}
	return false, messages == messagesBatch, nil
}

// exitProcess ends the process on an error no restart can cure; tests
// replace it.
var exitProcess = os.Exit

func (in *physicalWALInput) ReadBatch(ctx context.Context) (service.MessageBatch, service.AckFunc, error) {
	b, err := in.sess.Next(ctx)
	if err != nil {
		switch {
		case errors.Is(err, session.ErrClosed):
			return nil, nil, service.ErrEndOfInput
		case errors.Is(err, session.ErrReattached):
			// A config reload replaced this input: it has no future.
			return nil, nil, service.ErrEndOfInput
		case errors.Is(err, session.ErrStopped):
			// Connect restarts the session from its resume point after
			// the back-off, or reports why it cannot.
			in.stopped(err, false)
			return nil, nil, service.ErrNotConnected
		}
		return nil, nil, err
	}
	if in.batchMessages {
		return service.MessageBatch{batchMessage(b)}, in.ackFunc(b), nil
	}
	return recordMessages(b, in.allMeta), in.ackFunc(b), nil
}

// recordMessages is b as one message per record (messages: record).
func recordMessages(b *session.Batch, allMeta bool) service.MessageBatch {
	msgs := make(service.MessageBatch, 0, len(b.Items))
	recs := make([]msg.Record, len(b.Items))
	for i, it := range b.Items {
		r := &recs[i]
		recordMeta(r, it)
		r.Seq, r.Epoch = b.Seq, b.Epoch
		m := service.NewMessage(it.Record.Raw)
		msg.SetRecord(m, r, allMeta)
		// The boundary rides its commit record, the first item of its
		// transaction: the processor captures before decoding any row.
		if boundaryRides(it) {
			var boundary any
			raw, _ := json.Marshal(it.Tx.Boundary)
			_ = json.Unmarshal(raw, &boundary)
			m.MetaSetMut(MetaBoundary, boundary)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// boundaryRides tells the item a catalog boundary rides: its
// transaction's commit record.
func boundaryRides(it session.Item) bool {
	return it.Tx != nil && it.Tx.Boundary != nil && it.Record.LSN == it.Tx.CommitLSN
}

// batchMessage is b as one record batch message.
func batchMessage(b *session.Batch) *service.Message {
	rs := &msg.Records{Epoch: b.Epoch, Seq: b.Seq, Records: make([]msg.Record, len(b.Items)),
		Raw: make([][]byte, len(b.Items)), Boundary: make([]bool, len(b.Items))}
	for i, it := range b.Items {
		r := &rs.Records[i]
		recordMeta(r, it)
		r.Seq, r.Epoch = b.Seq, b.Epoch
		rs.Raw[i] = it.Record.Raw
		rs.Boundary[i] = boundaryRides(it)
	}
	m := service.NewMessage(nil)
	msg.SetRecords(m, rs)
	return m
}

// ackFunc acknowledges b to the session, or fails the run on a nack.
func (in *physicalWALInput) ackFunc(b *session.Batch) service.AckFunc {
	return func(ctx context.Context, err error) error {
		if err != nil {
			// A nack of an older run's batch is moot: that run already
			// stopped and its successor re-streams what the batch held.
			if b.Epoch == in.sess.Epoch() {
				in.sess.Fail(fmt.Errorf("batch %d of run %d was not delivered: %w", b.Seq, b.Epoch, err))
			}
			return nil
		}
		// Progress is judged at the next stop, by the delivered position
		// (restartPolicy): an acknowledgement alone is none, as a run
		// that re-delivers what it had and fails at the same record again
		// must keep backing off.
		in.sess.Ack(b)
		return nil
	}
}

// recordMeta fills r with the metadata of the record it carries; its
// transaction's is the session's own (shared by the transaction's records).
func recordMeta(r *msg.Record, it session.Item) {
	rec := it.Record
	*r = msg.Record{LSN: rec.LSN, Next: rec.Next, XID: rec.Header.XID, TopXID: rec.TopLevelXID,
		Rmgr: rec.Header.RmID, Info: rec.Header.Info, PGMajor: rec.Layout.Major,
		Deferred: it.Decision.DeferCatalogDecode, Last: it.Last}
	if it.Tx != nil {
		r.Tx = &it.Tx.Tx
	}
}

// Close stops reading; the session itself is a resource Benthos closes at
// shutdown, after every component using it.
func (in *physicalWALInput) Close(ctx context.Context) error { return nil }
