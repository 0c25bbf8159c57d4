package output

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/msg"
)

// blockingSession is a session whose batch 1 (of run 2) is never
// acknowledged: AwaitEarlier waits until its context ends.
type blockingSession struct{ fakeSession }

func (*blockingSession) AwaitEarlier(ctx context.Context, _, _ uint64) (bool, error) {
	<-ctx.Done()
	return true, ctx.Err()
}

func (*blockingSession) OldestUnacked(uint64) (uint64, bool) { return 1, true }

func seqBatch(seq uint64) service.MessageBatch {
	m := service.NewMessage(nil)
	m.MetaSetMut(msg.KeyChange, &msg.Change{Op: msg.OperationInsert, Rel: &msg.Relation{Oid: 1}, Tx: &msg.Tx{}, Epoch: 2, Seq: seq})
	return service.MessageBatch{m}
}

// turn is WriteBatch's way to awaitTurn: the batch's first session batch
// as parseBatch reads it.
func turn(ctx context.Context, o *chOutput, b service.MessageBatch) (func(), error) {
	pb := parseBatch(b)
	defer pb.release()
	return o.awaitTurn(ctx, pb.turnEpoch, pb.turnSeq)
}

// TestAwaitTurnLastSlot: a batch that would take the last in-flight slot
// while the batch every other waits for is not inside fails, with an error
// naming both, instead of keeping that batch out; batches queued behind
// one that is inside (threads: 1, a slow ClickHouse) wait their turn.
func TestAwaitTurnLastSlot(t *testing.T) {
	o := &chOutput{sess: &blockingSession{}, log: service.MockResources().Logger(), inOutput: map[batchKey]bool{}}
	for seq := uint64(2); seq < maxOrderedInFlight+1; seq++ {
		o.inOutput[batchKey{2, seq}] = true // maxOrderedInFlight-1 batches ahead of batch 1
	}
	_, err := turn(context.Background(), o, seqBatch(40))
	if err == nil || !strings.Contains(err.Error(), "batch 40 of session run 2 arrived 15 or more batches ahead of batch 1") {
		t.Fatalf("last slot, batch 1 outside: %v", err)
	}
	if o.inOutput[batchKey{2, 40}] {
		t.Error("the refused batch is still counted inside")
	}

	// Batch 1 inside: the last slot waits (here until its context ends).
	delete(o.inOutput, batchKey{2, 2})
	o.inOutput[batchKey{2, 1}] = true
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := turn(ctx, o, seqBatch(41)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("last slot, batch 1 inside: %v, want it to wait", err)
	}

	// Unnumbered messages do not wait.
	leave, err := turn(context.Background(), o, seqBatch(0))
	if err != nil {
		t.Fatal(err)
	}
	leave()
}

// TestParseBatchTurn: a batch merged from several session batches waits
// for the lowest numbered of its newest run; the runs are listed once
// each, in order, for the stale check.
func TestParseBatchTurn(t *testing.T) {
	mk := func(epoch, seq uint64) *service.Message {
		m := service.NewMessage(nil)
		m.MetaSetMut(msg.KeyChange, &msg.Change{Op: msg.OperationInsert, Rel: &msg.Relation{Oid: 1}, Tx: &msg.Tx{}, Epoch: epoch, Seq: seq})
		return m
	}
	pb := parseBatch(service.MessageBatch{mk(3, 7), mk(3, 7), mk(4, 9), mk(4, 5), mk(3, 2), mk(0, 0)})
	defer pb.release()
	if pb.turnEpoch != 4 || pb.turnSeq != 5 {
		t.Errorf("turn (%d, %d), want (4, 5)", pb.turnEpoch, pb.turnSeq)
	}
	if got := fmt.Sprint(pb.epochs); got != "[3 4 3]" {
		t.Errorf("epochs %s, want [3 4 3]", got)
	}
	if len(pb.changes) != 6 {
		t.Errorf("%d changes parsed, want 6", len(pb.changes))
	}
}
