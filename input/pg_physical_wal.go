// Package input registers the pg_physical_wal Benthos input and the
// walshadow custom resource (one source session) it reads from.
package input

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

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
)

func inputSpec() *service.ConfigSpec {
	return service.NewConfigSpec().
		Beta().
		Categories("Services").
		Summary("Streams a PostgreSQL source's physical WAL (a physical replication slot, no logical decoding) through a walshadow session, and emits the original records that carry row changes and transaction boundaries.").
		Description(`
Each message is one WAL record: the payload is the record's bytes exactly as
the source wrote them, and metadata names its position and kind:

- `+"`wal_lsn`"+`, `+"`wal_next_lsn`"+`: where the record starts, and where the next one does (PostgreSQL's EndRecPtr).
- `+"`wal_xid`"+`, `+"`wal_top_xid`"+`: the (sub)transaction id, and the top-level one when the record names it.
- `+"`wal_rmgr`"+`, `+"`wal_record_type`"+`: e.g. Heap / INSERT, Transaction / COMMIT.
- `+"`pg_major`"+`: the source's PostgreSQL major version.
- `+"`walshadow_boundary`"+` (structured, on the last message of a batch only): a catalog-changing commit. The session holds the shadow at this point until the batch is acknowledged downstream or, while no walshadow_decode processor takes part, until the shadow has applied it.

A batch ends at every catalog boundary. Records are delivered in WAL order;
keep `+"`pipeline.threads: 1`"+` and an output `+"`max_in_flight: 1`"+` where order matters.`).
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
	// A nacked batch is delivered again, in order, until it is acknowledged:
	// the resume floor stays at it meanwhile, so nothing past it is lost.
	return service.AutoRetryNacksBatched(in), nil
}

func (in *physicalWALInput) Connect(ctx context.Context) error {
	return in.sess.Start(ctx)
}

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
			return nil, nil, service.ErrNotConnected
		}
		return nil, nil, err
	}
	msgs := make(service.MessageBatch, 0, len(b.Items))
	for _, it := range b.Items {
		msgs = append(msgs, recordMessage(it))
	}
	if b.Boundary != nil {
		boundary, _ := json.Marshal(b.Boundary)
		var structured any
		_ = json.Unmarshal(boundary, &structured)
		msgs[len(msgs)-1].MetaSetMut(MetaBoundary, structured)
	}
	// Wrapped in AutoRetryNacksBatched, this is called once the batch has
	// been delivered.
	return msgs, func(ctx context.Context, err error) error {
		if err == nil {
			in.sess.Ack(b)
		}
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
	return m
}

// Close stops reading; the session itself is a resource Benthos closes at
// shutdown, after every component using it.
func (in *physicalWALInput) Close(ctx context.Context) error { return nil }
