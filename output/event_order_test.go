package output

import (
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/processor"
)

func TestDropsFirst(t *testing.T) {
	msg := func(name, op, event, oid, commit string) *service.Message {
		m := service.NewMessage([]byte(name))
		m.MetaSetMut(processor.MetaOperation, op)
		if event != "" {
			m.MetaSetMut(processor.MetaEvent, event)
		}
		m.MetaSetMut(processor.MetaRelationOid, oid)
		m.MetaSetMut(processor.MetaCommitLSN, commit)
		return m
	}
	schema, row := processor.OperationSchema, processor.OperationInsert
	added, changed, dropped := desclog.EventAdded.String(), desclog.EventChanged.String(), desclog.EventDropped.String()
	names := func(b service.MessageBatch) string {
		s := ""
		for _, m := range b {
			raw, _ := m.AsBytes()
			s += string(raw) + " "
		}
		return s
	}
	for _, c := range []struct {
		in   service.MessageBatch
		want string
	}{
		// DROP TABLE t; CREATE TABLE t: the drop first.
		{service.MessageBatch{msg("r0", row, "", "5", "0/1"), msg("add", schema, added, "20", "0/2"), msg("drop", schema, dropped, "10", "0/2"), msg("r1", row, "", "20", "0/2")},
			"r0 drop add r1 "},
		// A relation changed and dropped in one transaction keeps its order.
		{service.MessageBatch{msg("chg", schema, changed, "10", "0/2"), msg("drop", schema, dropped, "10", "0/2")}, "chg drop "},
		// Events of different transactions do not move across each other.
		{service.MessageBatch{msg("add", schema, added, "20", "0/2"), msg("drop", schema, dropped, "10", "0/3")}, "add drop "},
		{service.MessageBatch{msg("drop", schema, dropped, "10", "0/2"), msg("add", schema, added, "20", "0/2")}, "drop add "},
	} {
		if got := names(dropsFirst(c.in)); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}
