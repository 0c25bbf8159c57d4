package render

import (
	"context"
	"errors"
	"testing"

	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/desclog"
)

func TestPendingWithoutBridge(t *testing.T) {
	desc := &desclog.Descriptor{Oid: 16384, Namespace: "public", Name: "t"}
	col := &desclog.Column{Name: "v", TypeOid: 3614, TypeName: "tsvector"}
	rows := []decode.RowChange{{Op: decode.OpInsert, LSN: 0x10, Desc: desc, Fields: []decode.Field{
		{Col: col, Value: "decoded"},
		{Col: col, Pending: true, Null: true},
		{Col: col, Pending: true, Omitted: true},
	}}}
	// Nothing to render: no bridge needed.
	if n, err := Pending(context.Background(), nil, rows); n != 0 || err != nil {
		t.Fatalf("Pending without pending values = %d, %v", n, err)
	}
	rows[0].Fields = append(rows[0].Fields, decode.Field{Col: col, Pending: true, Raw: []byte{1}})
	failed := 0
	n, err := PendingOrFail(context.Background(), nil, rows, func(int, error) { failed++ })
	if n != 0 || !errors.Is(err, ErrNoBridge) || failed != 0 {
		t.Fatalf("PendingOrFail without a bridge = %d, %v (%d onFail calls)", n, err, failed)
	}
	want := "LSN " + rows[0].LSN.String() + `, relation public.t (oid 16384), column "v" (type tsvector): ` + ErrNoBridge.Error()
	if err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	if got := describeField(&rows[0], 3); got != "LSN "+rows[0].LSN.String()+`, relation public.t (oid 16384), column "v" (type tsvector)` {
		t.Fatalf("describeField = %q", got)
	}
}
