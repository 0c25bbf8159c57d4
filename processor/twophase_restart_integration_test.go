package processor_test

import (
	"context"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// TestDecodePreparedTransactionSurvivesRestart prepares a transaction, lets
// later transactions be delivered past its PREPARE, stops walshadow, and
// commits the prepared transaction while walshadow is down: after the
// restart its rows arrive, because the resume floor stayed at its first
// change, and the transactions delivered before the stop do not come again.
func TestDecodePreparedTransactionSurvivesRestart(t *testing.T) {
	src := testrig.StartPostgres(t, testrig.WithMaxPreparedTransactions(5))
	bridgeDir := buildPgext(t, src.BinDir())
	stateDir := newStateDir(t, src)
	const slot = "walshadow_2pc"
	yaml := pipelineYAML(src, stateDir, bridgeDir, testrig.FreePort(t), slot)

	// One model across both runs, as one downstream table would be.
	consumer := newModelConsumer(nil)
	run := func() (*modelConsumer, func()) {
		stream := buildStream(t, yaml, consumer)
		runErr := make(chan error, 1)
		go func() { runErr <- stream.Run(context.Background()) }()
		waitSlotActive(t, src, slot, runErr)
		return consumer, func() {
			if err := stream.StopWithin(time.Minute); err != nil {
				t.Logf("stopping the stream: %v", err)
			}
		}
	}

	first, stop := run()
	src.Exec(t, "CREATE TABLE tp (id int PRIMARY KEY, v text)")
	src.Exec(t, "BEGIN; INSERT INTO tp SELECT g, 'prepared ' || g FROM generate_series(1, 50) g; PREPARE TRANSACTION 'tp1'")
	src.Exec(t, "INSERT INTO tp VALUES (1000, 'after the prepare')")
	src.Exec(t, "CREATE TABLE tp_marker (id int PRIMARY KEY, token text)")
	beforeMarker, err := wal.ParseLSN(src.QueryString(t, "SELECT pg_current_wal_lsn()::text"))
	if err != nil {
		t.Fatal(err)
	}
	src.Exec(t, "INSERT INTO tp_marker VALUES (1, 'first')")
	waitToken(t, first, "first")
	// Let manifest.json record the delivery of everything up to the marker
	// (it is written every tick): what it records is not delivered again.
	var resume, delivered wal.LSN
	deadline := time.Now().Add(30 * time.Second)
	for {
		if ps, err := readProgress(stateDir); err == nil {
			resume, delivered = ps.resume, ps.delivered
		}
		if delivered > beforeMarker || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	stop()
	if n := first.model.RowCount("public.tp"); n != 1 {
		t.Fatalf("before COMMIT PREPARED the model holds %d rows of tp, want the one committed row", n)
	}
	if src.QueryInt(t, "SELECT count(*) FROM pg_prepared_xacts WHERE gid = 'tp1'") != 1 {
		t.Fatal("no prepared transaction")
	}
	if delivered == 0 || resume == 0 {
		t.Fatalf("manifest.json after delivery: resume %s delivered %s", resume, delivered)
	}

	src.Exec(t, "COMMIT PREPARED 'tp1'")
	src.Exec(t, "INSERT INTO tp_marker VALUES (2, 'second')")
	second, stop2 := run()
	defer stop2()
	waitToken(t, second, "second")
	if n := second.model.RowCount("public.tp"); n != 51 {
		t.Fatalf("after the restart the model holds %d rows of tp, want 51 (one committed before, 50 prepared)", n)
	}
	// 1 + 50 tp rows and two marker rows, nothing delivered twice.
	if s := second.model.Stats(); s.Inserts != 53 || s.Duplicates != 0 {
		t.Fatalf("inserts and duplicates: %+v, want 53 inserts and no duplicate", s)
	}
	if errs := second.errors(); len(errs) > 0 {
		t.Fatalf("model: %v", errs)
	}
}

// waitToken waits until the model holds tp_marker's row with token.
func waitToken(t *testing.T, c *modelConsumer, token string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		found := false
		for _, id := range []string{"1", "2"} {
			row, ok := c.model.Lookup("public.tp_marker", &id)
			found = found || ok && row["token"] != nil && *row["token"] == token
		}
		c.mu.Unlock()
		if found {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("marker %q never arrived (errors: %v)", token, c.errors())
}
