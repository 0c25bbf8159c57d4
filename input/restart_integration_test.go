package input

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/config"
	"github.com/walshadow/walshadow/internal/msg"
	"github.com/walshadow/walshadow/internal/session"
	"github.com/walshadow/walshadow/internal/testrig"
)

// TestRestartBackoffHoldsOnARefusedBatch is the user report on a real
// session: downstream refuses the batch of one transaction at every run,
// after acknowledging what came before it again. The restarts must back
// off (1, 2, 4, 8 s ...) rather than fall back to 1 s because batches were
// acknowledged, and the failure is logged once, then as "still failing"
// lines with the count. Once the transaction goes through, the next stop
// starts the back-off afresh. The back-off waits are recorded, not slept.
func TestRestartBackoffHoldsOnARefusedBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	src := testrig.StartPostgres(t)
	src.Exec(t, "CREATE TABLE refused (id int PRIMARY KEY, v text)")

	dir, err := os.MkdirTemp("", "walshadow-restart-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(dir)
		}
	})
	sess := session.New(config.Session{
		SourceDSN:       src.DSN(),
		StateDir:        dir,
		SlotName:        "walshadow_restart_test",
		CreateSlot:      true,
		ShadowBinDir:    src.BinDir(),
		ShadowOSUser:    testrig.ServerOSUser(),
		ShadowPort:      testrig.FreePort(t),
		HoldTimeout:     30 * time.Second,
		StatusInterval:  time.Second,
		MaxBatchRecords: 1024,
		RetentionBytes:  256 << 20,
		SlowThreshold:   64 << 20,
	}, nil, nil)
	t.Cleanup(func() { sess.Close(context.Background()) })

	rec := &lineRecorder{}
	var waits []time.Duration
	in := &physicalWALInput{label: "main", sess: sess, restarts: newRestartPolicy(),
		mgr: service.MockResources(service.MockResourcesOptUseLogger(service.NewLoggerFromSlog(slog.New(rec)))),
		sleep: func(_ context.Context, d time.Duration) error {
			waits = append(waits, d)
			return nil
		}}
	if err := in.Connect(ctx); err != nil {
		t.Fatal(err)
	}

	// commit runs one transaction and returns its xid.
	commit := func(id int) string {
		conn, err := pgx.Connect(ctx, src.DSN())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var xid int64
		if err := tx.QueryRow(ctx, "INSERT INTO refused VALUES ($1, 'v') RETURNING txid_current()", id).Scan(&xid); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return strconv.FormatInt(xid&0xffffffff, 10)
	}
	// until reads, acknowledging every batch but those holding refuse
	// (nacked while refusals lasts), until a batch holds done; a stop
	// restarts the session through Connect, as Benthos does.
	refusals := 0
	until := func(done, refuse string, refusalsWanted int) {
		t.Helper()
		for ctx.Err() == nil {
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
			msgs, ack, err := in.ReadBatch(rctx)
			rcancel()
			switch {
			case errors.Is(err, service.ErrNotConnected):
				if err := in.Connect(ctx); err != nil {
					t.Fatal(err)
				}
				continue
			case errors.Is(err, context.DeadlineExceeded):
				continue
			case err != nil:
				t.Fatal(err)
			}
			has := func(xid string) bool {
				found := false
				err := msg.EachRecord(msgs, func(r *msg.Record, _ []byte, _ bool) error {
					found = found || r.Tx != nil && strconv.FormatUint(uint64(r.Tx.TopXID), 10) == xid
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				return found
			}
			if refuse != "" && has(refuse) && refusals < refusalsWanted {
				refusals++
				_ = ack(ctx, errors.New("code 241: memory limit exceeded"))
				continue
			}
			_ = ack(ctx, nil)
			if has(done) {
				return
			}
		}
		t.Fatalf("no batch of transaction %s (waits %v)\n%s", done, waits, strings.Join(rec.lines, "\n"))
	}

	first := commit(1)
	until(first, "", 0)
	poison := commit(2)
	const nacks = 5
	until(poison, poison, nacks)
	if len(waits) != nacks {
		t.Fatalf("%d restarts for %d refusals: waits %v", len(waits), nacks, waits)
	}
	// A restart may see the position the previous run stored past what it
	// had acknowledged (every record before the refused one handled) once:
	// one reset at most, never a streak of 1 s.
	for i := 2; i < nacks; i++ {
		if waits[i] != 2*waits[i-1] {
			t.Errorf("waits %v: not doubling from the third restart", waits)
			break
		}
	}
	if waits[nacks-1] < 8*time.Second {
		t.Errorf("waits %v: the back-off did not hold", waits)
	}
	if len(rec.lines) != nacks || !strings.HasPrefix(rec.lines[0], "walshadow session stopped: batch ") ||
		!strings.Contains(rec.lines[nacks-1], "still failing: batch ") || !strings.Contains(rec.lines[nacks-1], "memory limit exceeded (") {
		t.Errorf("lines:\n%s", strings.Join(rec.lines, "\n"))
	}

	// Delivered past the refused transaction: the next stop waits 1 s.
	later := commit(3)
	until(later, "", 0)
	refusals = 0
	last := commit(4)
	until(last, last, 1)
	if got := waits[len(waits)-1]; got != time.Second || len(waits) != nacks+1 {
		t.Errorf("waits %v: the stop after progress does not wait 1 s", waits)
	}
}
