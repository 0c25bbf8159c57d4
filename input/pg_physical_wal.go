// Package input registers the pg_physical_wal Benthos input and the
// walshadow custom resource (one source session) it reads from.
package input

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/config"
	"github.com/walshadow/walshadow/internal/session"
	"github.com/walshadow/walshadow/internal/wal"
)

// Metadata keys set on every message (one message per WAL record).
const (
	MetaLSN        = "wal_lsn"
	MetaNextLSN    = "wal_next_lsn"
	MetaXID        = "wal_xid"
	MetaTopXID     = "wal_top_xid"
	MetaRmgr       = "wal_rmgr"
	MetaRecordType = "wal_record_type"
	MetaPGMajor    = "pg_major"
	MetaDeferred   = "walshadow_defer_catalog_decode"
	MetaBoundary   = "walshadow_boundary"

	// Transaction metadata: every message belongs to one committed
	// transaction, emitted whole and in commit order.
	MetaCommitLSN  = "walshadow_commit_lsn"
	MetaCommitNext = "walshadow_commit_next_lsn"
	MetaTxTopXID   = "walshadow_top_xid"
	MetaCommitTime = "walshadow_commit_time"
	MetaTxLast     = "walshadow_tx_last"
	MetaTxFirstLSN = "walshadow_tx_first_lsn"
	MetaSeq        = "walshadow_seq"
	MetaEpoch      = "walshadow_epoch"
)

func inputSpec() *service.ConfigSpec {
	return service.NewConfigSpec().
		Beta().
		Categories("Services").
		Summary("Streams a PostgreSQL source's physical WAL (a physical replication slot, no logical decoding) through a walshadow session, and emits the records of committed transactions, whole and in commit order.").
		Description(`
Each message is one WAL record: the payload is the record's bytes exactly as
the source wrote them. Row changes are buffered per transaction inside the
session (spilling to `+"`state_dir/spill`"+` past `+"`transaction_buffer_bytes`"+`) and
come out at their commit: the commit record first, then every row change of
the transaction tree merged by LSN; aborted work and rolled-back savepoints
never come out. A large transaction spans several batches. Metadata:

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
acknowledged. Keep `+"`pipeline.threads: 1`"+` where order matters.`).
		Field(service.NewStringField(config.FieldSession).
			Description("Label of the `walshadow` resource (the source session) to read.").
			Example("main")).
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
	mgr   *service.Resources
	sess  *session.Session

	// failures counts session stops since the last acknowledged batch:
	// restarts back off (1 s doubling to 30 s) so a failure that recurs at
	// the same record does not restart the session several times a second.
	failures atomic.Int32
}

// restartBackoff is the wait before the n-th consecutive restart.
func restartBackoff(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	return min(time.Second<<min(n-1, 5), 30*time.Second)
}

func newInput(conf *service.ParsedConfig, mgr *service.Resources) (service.BatchInput, error) {
	label, err := conf.FieldString(config.FieldSession)
	if err != nil {
		return nil, err
	}
	in := &physicalWALInput{label: label, mgr: mgr}
	err = mgr.AccessCustomResource(context.Background(), config.ResourceType, label, func(v any) {
		in.sess, _ = v.(*session.Session)
	})
	if err != nil || in.sess == nil {
		return nil, fmt.Errorf("%s: no %s resource labelled %q: %v", config.FieldSession, config.ResourceType, label, err)
	}
	// A nacked batch is not delivered again as it was: the session restarts
	// from its durable resume point (nothing past the resume floor is lost)
	// and streams it again in a new run, decoder state rebuilt. Replaying
	// the same batch instead would meet a decoder that has moved past it.
	return in, nil
}

func (in *physicalWALInput) Connect(ctx context.Context) error {
	if n := int(in.failures.Load()); restartBackoff(n) > 0 {
		wait := restartBackoff(n)
		in.mgr.Logger().Infof("restarting the walshadow session in %s (%d consecutive stops without progress)", wait, n)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// A new input on a running session is a config reload (walshadow run
	// -w): the old pipeline's batches are gone with it, so the session
	// resumes from its durable state rather than continue mid-run.
	in.sess.Attach(in)
	err := in.sess.Start(ctx)
	if err != nil && session.IsPermanent(err) {
		// Retrying cannot help and would repeat the same line forever:
		// say it once and stop, nothing having been written.
		in.mgr.Logger().Errorf("walshadow cannot start: %v", err)
		exitProcess(1)
	}
	return err
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
		case errors.Is(err, session.ErrStopped):
			// Connect restarts the session from its resume point, or
			// reports why it cannot.
			in.mgr.Logger().Errorf("%v", err)
			in.failures.Add(1)
			return nil, nil, service.ErrNotConnected
		}
		return nil, nil, err
	}
	msgs := make(service.MessageBatch, 0, len(b.Items))
	seq, epoch := strconv.FormatUint(b.Seq, 10), strconv.FormatUint(b.Epoch, 10)
	for _, it := range b.Items {
		m := recordMessage(it)
		m.MetaSetMut(MetaSeq, seq)
		m.MetaSetMut(MetaEpoch, epoch)
		// The boundary rides its commit record, the first item of its
		// transaction: the processor captures before decoding any row.
		if tx := it.Tx; tx != nil && tx.Boundary != nil && it.Record.LSN == tx.CommitLSN {
			var boundary any
			raw, _ := json.Marshal(tx.Boundary)
			_ = json.Unmarshal(raw, &boundary)
			m.MetaSetMut(MetaBoundary, boundary)
		}
		msgs = append(msgs, m)
	}
	return msgs, func(ctx context.Context, err error) error {
		if err != nil {
			// A nack of an older run's batch is moot: that run already
			// stopped and its successor re-streams what the batch held.
			if b.Epoch == in.sess.Epoch() {
				in.sess.Fail(fmt.Errorf("batch %d of run %d was not delivered: %w; restarting the session from its resume point", b.Seq, b.Epoch, err))
			}
			return nil
		}
		in.sess.Ack(b)
		// Progress: a later stop starts its backoff afresh. (Reading a
		// batch is not progress: a batch the output refuses every time
		// would otherwise restart the session every second forever.)
		in.failures.Store(0)
		return nil
	}, nil
}

func recordMessage(it session.Item) *service.Message {
	rec := it.Record
	m := service.NewMessage(rec.Raw)
	m.MetaSetMut(MetaLSN, rec.LSN.String())
	m.MetaSetMut(MetaNextLSN, rec.Next.String())
	m.MetaSetMut(MetaXID, strconv.FormatUint(uint64(rec.Header.XID), 10))
	if rec.TopLevelXID != 0 {
		m.MetaSetMut(MetaTopXID, strconv.FormatUint(uint64(rec.TopLevelXID), 10))
	}
	m.MetaSetMut(MetaRmgr, rec.Header.RmID.String())
	m.MetaSetMut(MetaRecordType, wal.Identify(rec.Layout, rec.Header.RmID, rec.Header.Info))
	m.MetaSetMut(MetaPGMajor, strconv.Itoa(rec.Layout.Major))
	if it.Decision.DeferCatalogDecode {
		m.MetaSetMut(MetaDeferred, "true")
	}
	if tx := it.Tx; tx != nil {
		m.MetaSetMut(MetaCommitLSN, tx.CommitLSN.String())
		m.MetaSetMut(MetaCommitNext, tx.CommitNext.String())
		m.MetaSetMut(MetaTxTopXID, strconv.FormatUint(uint64(tx.TopXID), 10))
		m.MetaSetMut(MetaCommitTime, tx.CommitTime.Format(time.RFC3339Nano))
		m.MetaSetMut(MetaTxFirstLSN, tx.FirstLSN.String())
	}
	if it.Last {
		m.MetaSetMut(MetaTxLast, "true")
	}
	return m
}

// Close stops reading; the session itself is a resource Benthos closes at
// shutdown, after every component using it.
func (in *physicalWALInput) Close(ctx context.Context) error { return nil }
