package batchdecode

import (
	"time"

	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/msg"
	"github.com/walshadow/walshadow/internal/wal"
)

// Record is one WAL record of a batch, as the input handed it out.
type Record struct {
	Meta *msg.Record
	Raw  []byte // the record's bytes
	// Boundary: a catalog boundary rides the record (its transaction's
	// commit record), to be captured before any of its rows decode.
	Boundary bool
}

// Tx is the committed transaction rows and events belong to, with what a
// message of it needs formatted once.
type Tx struct {
	TopXID     uint32
	CommitLSN  wal.LSN
	CommitNext wal.LSN
	CommitTime time.Time

	// Typed is every change's typed transaction (the input's);
	// CommitLSNText the commit LSN's text, boxed once: a routing string
	// of every row.
	Typed         *msg.Tx
	CommitLSNText any
}

// Event is a schema event of a table, placed before the row at index
// Before of its batch.
type Event struct {
	Before int
	Event  *desclog.Event
	Tx     *Tx
}

// Batch is one input batch decoded: its rows in commit order, each with
// its transaction, and the schema events in their places.
type Batch struct {
	Epoch uint64 // the session run the batch belongs to
	Seq   uint64 // the batch's number in the run
	Rows  []decode.RowChange
	RowTx []*Tx
	// Events are in order of Before; several may share one.
	Events []Event
}
