package output

import (
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/processor"
)

// dropsFirst reorders the schema events of one transaction so that the
// drops of relations that have no other event in it come before the rest:
// the descriptor log orders a transaction's events by where each takes
// effect, and a DROP takes effect at the commit, after the CREATE of a
// new relation of the same name in the same transaction (DROP TABLE t;
// CREATE TABLE t ...), whose ClickHouse table would otherwise meet the
// old relation's, still followed. Rows, and every other event, keep their
// order. It returns batch itself when nothing moves.
func dropsFirst(batch service.MessageBatch) service.MessageBatch {
	var out service.MessageBatch
	for i := 0; i < len(batch); {
		commit, ok := schemaCommit(batch[i])
		if !ok {
			if out != nil {
				out = append(out, batch[i])
			}
			i++
			continue
		}
		j := i + 1
		for j < len(batch) {
			if c, ok := schemaCommit(batch[j]); !ok || c != commit {
				break
			}
			j++
		}
		run := batch[i:j]
		if moved := dropsFirstRun(run); moved != nil {
			if out == nil {
				out = append(make(service.MessageBatch, 0, len(batch)), batch[:i]...)
			}
			out = append(out, moved...)
		} else if out != nil {
			out = append(out, run...)
		}
		i = j
	}
	if out == nil {
		return batch
	}
	return out
}

// schemaCommit is a schema event's commit position (text, as carried).
func schemaCommit(m *service.Message) (string, bool) {
	if op, _ := m.MetaGet(processor.MetaOperation); op != processor.OperationSchema {
		return "", false
	}
	c, _ := m.MetaGet(processor.MetaCommitLSN)
	return c, true
}

// dropsFirstRun is dropsFirst for one transaction's events, nil when
// their order stands.
func dropsFirstRun(run service.MessageBatch) service.MessageBatch {
	if len(run) < 2 {
		return nil
	}
	events := map[string]int{}
	for _, m := range run {
		oid, _ := m.MetaGet(processor.MetaRelationOid)
		events[oid]++
	}
	var drops, rest service.MessageBatch
	for _, m := range run {
		ev, _ := m.MetaGet(processor.MetaEvent)
		oid, _ := m.MetaGet(processor.MetaRelationOid)
		if ev == desclog.EventDropped.String() && events[oid] == 1 {
			drops = append(drops, m)
		} else {
			rest = append(rest, m)
		}
	}
	if len(drops) == 0 || len(rest) == 0 {
		return nil
	}
	moved := append(drops, rest...)
	for i := range run {
		if moved[i] != run[i] {
			return moved
		}
	}
	return nil
}
