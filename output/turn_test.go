package output

import (
	"context"
	"strings"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/msg"
)

// blockingSession is a session whose earlier batches are never
// acknowledged: AwaitEarlier waits until its context ends.
type blockingSession struct{ fakeSession }

func (*blockingSession) AwaitEarlier(ctx context.Context, _, _ uint64) (bool, error) {
	<-ctx.Done()
	return true, ctx.Err()
}

// TestAwaitTurnLastSlot: a batch that must wait and would take the last
// in-flight slot fails at once, with an error naming it, instead of
// keeping out the batch it waits for; one that need not wait goes on.
func TestAwaitTurnLastSlot(t *testing.T) {
	m := service.NewMessage(nil)
	m.MetaSetMut(msg.KeyChange, &msg.Change{Op: msg.OperationInsert, Epoch: 2, Seq: 9})
	batch := service.MessageBatch{m}

	o := &chOutput{sess: &blockingSession{}, log: service.MockResources().Logger()}
	o.waiting.Store(maxOrderedInFlight - 1)
	err := o.awaitTurn(context.Background(), batch)
	if err == nil || !strings.Contains(err.Error(), "batch 9 of session run 2 arrived more than") {
		t.Fatalf("last slot, must wait: %v", err)
	}
	if n := o.waiting.Load(); n != maxOrderedInFlight-1 {
		t.Errorf("waiting %d after the refusal, want %d", n, maxOrderedInFlight-1)
	}

	o.sess = &fakeSession{}
	if err := o.awaitTurn(context.Background(), batch); err != nil {
		t.Errorf("last slot, no need to wait: %v", err)
	}
	o.waiting.Store(0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o.sess = &blockingSession{}
	if err := o.awaitTurn(ctx, batch); err == nil {
		t.Error("a wait whose context ended returned no error")
	}
}
