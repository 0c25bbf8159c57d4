package output_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestTruncateUnderReaderSurvivesClickHouseKill: ClickHouse 18.16's
// TRUNCATE leaves parts of the table on disk for minutes (those its merges
// replaced, those a query holds), and a restart before they are gone
// loads them again. A source TRUNCATE (of a keyed table and of a keyless
// one, each written in twenty inserts) is mirrored while readers keep both
// tables busy, ClickHouse is SIGKILLed right after the TRUNCATE is applied
// and started again, and the source goes on (the keyless table gets a
// primary key: its rebuild copies its rows out of the table the restart
// brought parts back into): every table must end equal to the source, and
// the output says ClickHouse restarted.
func TestTruncateUnderReaderSurvivesClickHouseKill(t *testing.T) {
	r := newRig(t)
	logs := &logLines{}
	run := r.startLogged(t, "", logs)
	r.src.Exec(t, `CREATE TABLE tk (id int8 PRIMARY KEY, v text);
CREATE TABLE tn (id int8, v text); ALTER TABLE tn REPLICA IDENTITY FULL`)
	tk, tn := chTable("public", "tk"), chTable("public", "tn")

	// Twenty transactions, each written as its own insert: twenty parts
	// of each table (some merged meanwhile).
	const txs, rows = 20, 50
	for i := 0; i < txs; i++ {
		lo, hi := i*rows+1, (i+1)*rows
		r.src.Exec(t, fmt.Sprintf(`INSERT INTO tk SELECT g, md5(g::text) FROM generate_series(%d, %d) g;
INSERT INTO tn SELECT g, md5(g::text) FROM generate_series(%d, %d) g`, lo, hi, lo, hi))
		r.waitCH(t, run, "SELECT count() FROM "+tn, fmt.Sprint(hi), time.Minute)
	}
	r.waitCH(t, run, "SELECT count() FROM "+tk, fmt.Sprint(txs*rows), time.Minute)

	// Readers on both tables, one query after the other, as a dashboard
	// or walshadow's own TOAST read-backs would.
	ctx, stopReaders := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var readsMu sync.Mutex
	reads := 0
	for _, table := range []string{tk, tk, tn, tn} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := r.ch.Query(ctx, "SELECT count(), sleep(3) FROM "+table); err == nil {
					readsMu.Lock()
					reads++
					readsMu.Unlock()
				} else {
					time.Sleep(50 * time.Millisecond) // (the server is away)
				}
			}
		}()
	}
	defer func() { stopReaders(); wg.Wait() }()
	time.Sleep(500 * time.Millisecond) // every reader is in its query

	r.src.Exec(t, `BEGIN; TRUNCATE tk, tn;
INSERT INTO tk VALUES (-1, 'after'), (-2, 'after'); INSERT INTO tn VALUES (-1, 'after'); COMMIT`)
	// Applied once the rows after the TRUNCATE are in (they are written
	// after both tables' TRUNCATE): then kill ClickHouse at once.
	applied := time.Now()
	deadline := applied.Add(time.Minute)
	for {
		a, errA := r.ch.Query(context.Background(), "SELECT count() FROM "+tk)
		b, errB := r.ch.Query(context.Background(), "SELECT count() FROM "+tn)
		if errA == nil && errB == nil && a == "2" && b == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the TRUNCATE was not applied within a minute: %s rows in tk (%v), %s in tn (%v)", a, errA, b, errB)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("TRUNCATE applied %v after it committed", time.Since(applied).Round(time.Millisecond))
	left := 0
	for _, name := range []string{"public%2Etk", "public%2Etn"} {
		parts, _ := filepath.Glob(filepath.Join(r.ch.Dir(), "data", "data", "walshadow_test", name, "all_*"))
		left += len(parts)
	}
	r.ch.KillServer(t)
	stopReaders()
	wg.Wait()
	t.Logf("ClickHouse killed with %d part directories of the two tables on disk (the TRUNCATE's among them), %d reads done", left, reads)
	r.ch.StartServer(t)

	// The source goes on: new rows, updates, and a primary key for tn (a
	// rebuild that copies tn's rows into a new table).
	r.src.Exec(t, `INSERT INTO tk SELECT g, md5(g::text) FROM generate_series(5001, 5100) g;
UPDATE tk SET v = v || '+' WHERE id < 0 OR id % 3 = 0;
INSERT INTO tn SELECT g, md5(g::text) FROM generate_series(5001, 5050) g;
DELETE FROM tn WHERE id % 5 = 0;
ALTER TABLE tn ADD PRIMARY KEY (id);
UPDATE tn SET v = 'keyed' WHERE id % 7 = 0`)
	r.src.Exec(t, "CREATE TABLE tr_marker (id int PRIMARY KEY); INSERT INTO tr_marker VALUES (1)")
	r.waitCH(t, run, fmt.Sprintf("SELECT count() FROM %s FINAL WHERE _is_deleted = 0", chTable("public", "tr_marker")), "1", 3*time.Minute)
	run.stop(t)
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "ClickHouse restarted (up since") || strings.Contains(l, "truncate mutation") {
			t.Log(l)
		}
	}
	if !strings.Contains(logs.String(), "ClickHouse restarted (up since") {
		t.Errorf("the output did not log that ClickHouse restarted; log tail:\n%s", tail(logs.String(), 3000))
	}
	r.compareAll(t)
}
