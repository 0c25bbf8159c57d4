package msg

import (
	"fmt"
	"strconv"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// Changes is a change batch message's metadata: everything one input
// batch decoded to, as one message (walshadow_decode's `messages: batch`),
// in order, each change with the payload its own message would have had
// (a row's columns, a schema event's shape, a failure's empty object).
// The message's payload is empty; its only strings are KeySeq and
// KeyEpoch. Only an output that reads Changes (clickhouse_ddl) can take
// such a message: it spares a Benthos message, a metadata map and the
// routing strings per row.
type Changes struct {
	Epoch, Seq uint64
	Changes    []Change
	Payloads   []map[string]any // Payloads[i]: change i's
}

// SetChanges sets cs on m: the typed value, and the batch's position as
// strings.
func SetChanges(m *service.Message, cs *Changes) {
	m.MetaSetMut(KeyChanges, cs)
	m.MetaSetMut(KeySeq, strconv.FormatUint(cs.Seq, 10))
	m.MetaSetMut(KeyEpoch, strconv.FormatUint(cs.Epoch, 10))
}

// ChangesOf reads m's change batch, if m is a change batch message; an
// error when its slices disagree.
func ChangesOf(m *service.Message) (*Changes, bool, error) {
	v, ok := m.MetaGetMut(KeyChanges)
	if !ok {
		return nil, false, nil
	}
	cs, ok := v.(*Changes)
	if !ok {
		return nil, false, fmt.Errorf("%s holds %T, not a change batch", KeyChanges, v)
	}
	if len(cs.Payloads) != len(cs.Changes) {
		return nil, true, fmt.Errorf("change batch %d of run %d: %d changes, %d payloads", cs.Seq, cs.Epoch, len(cs.Changes), len(cs.Payloads))
	}
	return cs, true, nil
}
