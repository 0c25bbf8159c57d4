package msg

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// Records is a record batch message's metadata: a whole session batch
// carried as one message (pg_physical_wal's `messages: batch`), its
// records in order with their bytes and which of them a catalog boundary
// rides. The message's payload is empty; its only strings are KeySeq and
// KeyEpoch. One message per batch instead of one per record spares a
// Benthos message, a metadata map and a tracing span per record.
type Records struct {
	Epoch, Seq uint64
	Records    []Record // each with the batch's Seq and Epoch
	Raw        [][]byte // Raw[i]: record i's bytes
	// Boundary[i]: a catalog boundary rides record i (its transaction's
	// commit record), what KeyBoundary says of a record message.
	Boundary []bool
}

// SetRecords sets rs on m: the typed value, and the batch's position as
// strings.
func SetRecords(m *service.Message, rs *Records) {
	m.MetaSetMut(KeyRecords, rs)
	m.MetaSetMut(KeySeq, strconv.FormatUint(rs.Seq, 10))
	m.MetaSetMut(KeyEpoch, strconv.FormatUint(rs.Epoch, 10))
}

// RecordsOf reads m's record batch, if m is a record batch message.
func RecordsOf(m *service.Message) (*Records, bool) {
	v, ok := m.MetaGetMut(KeyRecords)
	if !ok {
		return nil, false
	}
	rs, ok := v.(*Records)
	return rs, ok
}

// ErrNotRecords: a message is neither a record message nor a record batch.
var ErrNotRecords = errors.New("not a pg_physical_wal record message")

// EachRecord calls f for every record batch carries, in order, whichever
// form they come in: record batch messages, or one message per record
// (its typed value or else its strings, its payload, and, on a commit
// record, whether KeyBoundary is set). f's arguments are read-only.
func EachRecord(batch service.MessageBatch, f func(r *Record, raw []byte, boundary bool) error) error {
	for _, m := range batch {
		if rs, ok := RecordsOf(m); ok {
			if len(rs.Raw) != len(rs.Records) || len(rs.Boundary) != len(rs.Records) {
				return fmt.Errorf("record batch %d of run %d: %d records, %d payloads, %d boundary flags", rs.Seq, rs.Epoch, len(rs.Records), len(rs.Raw), len(rs.Boundary))
			}
			for i := range rs.Records {
				if err := f(&rs.Records[i], rs.Raw[i], rs.Boundary[i]); err != nil {
					return err
				}
			}
			continue
		}
		r, err := RecordOf(m)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrNotRecords, err)
		}
		raw, err := m.AsBytes()
		if err != nil {
			return err
		}
		boundary := false
		if r.Tx != nil && r.LSN == r.Tx.CommitLSN {
			// (Only a commit record carries it: no lookup for the rest.)
			_, boundary = m.MetaGetMut(KeyBoundary)
		}
		if err := f(r, raw, boundary); err != nil {
			return err
		}
	}
	return nil
}
