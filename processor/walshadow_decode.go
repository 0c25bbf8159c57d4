// Package processor registers the walshadow_decode Benthos processor.
//
// Today it performs the processor side of the catalog-boundary hold: for a
// batch that ends at a boundary it waits until the shadow has replayed
// exactly through the boundary, captures the changed relation shapes into
// the session's durable descriptor log, and releases the hold. Row decoding
// (turning heap records into row changes) is the next issue; until then the
// records pass through unchanged.
package processor

import (
	"context"
	"fmt"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/config"
	"github.com/walshadow/walshadow/input"
	"github.com/walshadow/walshadow/internal/session"
	"github.com/walshadow/walshadow/internal/wal"
)

func decodeSpec() *service.ConfigSpec {
	return service.NewConfigSpec().
		Beta().
		Categories("Parsing").
		Summary("Takes part in a walshadow session's catalog-boundary holds: captures relation shapes into the session's descriptor log at every catalog-changing commit. (Row decoding arrives with a later release; records pass through unchanged.)").
		Description(`
Place it right after the ` + "`pg_physical_wal`" + ` input of the same session, with
` + "`pipeline.threads: 1`" + `. At a batch ending in a catalog boundary it waits until
the shadow has replayed exactly through the boundary (a shadow found past it is
a fatal error: the hold was broken), reads the affected relations' shapes from
the shadow, appends them durably to the descriptor log, and releases the
session's hold.`).
		Field(service.NewStringField(config.FieldSession).
			Description("Label of the `walshadow` resource (the source session) whose records this processor receives.").
			Example("main"))
}

func init() {
	err := service.RegisterBatchProcessor("walshadow_decode", decodeSpec(),
		func(conf *service.ParsedConfig, mgr *service.Resources) (service.BatchProcessor, error) {
			label, err := conf.FieldString(config.FieldSession)
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
			// Holds are released by this processor from now on.
			sess.AttachProcessor()
			return &decodeProcessor{sess: sess, log: mgr.Logger()}, nil
		})
	if err != nil {
		panic(err)
	}
}

type decodeProcessor struct {
	sess *session.Session
	log  *service.Logger
}

func (p *decodeProcessor) ProcessBatch(ctx context.Context, batch service.MessageBatch) ([]service.MessageBatch, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	last := batch[len(batch)-1]
	if _, ok := last.MetaGetMut(input.MetaBoundary); ok {
		next, _ := last.MetaGet(input.MetaNextLSN)
		lsn, err := wal.ParseLSN(next)
		if err != nil {
			return nil, fmt.Errorf("boundary message without a valid %s: %w", input.MetaNextLSN, err)
		}
		// A failed capture leaves the hold on: the session times out and
		// stops, rather than letting records past an uncaptured shape through.
		if err := p.sess.CaptureAndRelease(ctx, lsn); err != nil {
			return nil, fmt.Errorf("capturing the catalog boundary at %s: %w", lsn, err)
		}
	}
	return []service.MessageBatch{batch}, nil
}

func (p *decodeProcessor) Close(ctx context.Context) error { return nil }
