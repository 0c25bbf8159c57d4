package output_test

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/testrig"
)

// TestTruncateBetweenBursts: TRUNCATEs of tables without a key (REPLICA
// IDENTITY FULL and NOTHING, a change log too) and of a keyed one, alone
// and several in one statement, sometimes with inserts after them in the
// same transaction, fall between bursts of DML that three clients run on
// every table at once. Every TRUNCATE must reach ClickHouse: once the
// stream is through, each table equals its source.
func TestTruncateBetweenBursts(t *testing.T) {
	seed := testrig.TestSeed(t)
	rng := rand.New(rand.NewSource(seed))
	r := newRig(t)
	run := r.start(t, `
drop_strategy: drop
tables: { "public.tr_log": { change_log: true } }
`)
	tables := []string{"tr_keyed", "tr_full", "tr_nothing", "tr_log"}
	r.src.Exec(t, `
CREATE TABLE tr_keyed (id int8 PRIMARY KEY, v text, n int4);
CREATE TABLE tr_full (id int8, v text, n int4); ALTER TABLE tr_full REPLICA IDENTITY FULL;
CREATE TABLE tr_nothing (id int8, v text, n int4); ALTER TABLE tr_nothing REPLICA IDENTITY NOTHING;
CREATE TABLE tr_log (id int8, v text, n int4); ALTER TABLE tr_log REPLICA IDENTITY FULL;`)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const clients, rounds = 3, 25
	conns := make([]*pgx.Conn, clients+1)
	for i := range conns {
		conns[i] = r.src.Connect(t)
	}
	next := make([]int64, clients)
	burst := func(c int, rr *rand.Rand) error {
		conn := conns[c]
		for i := 0; i < 10+rr.Intn(20); i++ {
			tb := tables[rr.Intn(len(tables))]
			var sql string
			switch rr.Intn(6) {
			case 0, 1, 2:
				next[c]++
				id := next[c]*clients + int64(c)
				sql = fmt.Sprintf("INSERT INTO %s VALUES (%d, md5('%d'), %d)", tb, id, id, rr.Intn(100))
				if tb != "tr_keyed" && rr.Intn(4) == 0 {
					sql += fmt.Sprintf(", (%d, md5('%d'), 7)", id, id) // a duplicate row
				}
			case 3, 4:
				sql = fmt.Sprintf("UPDATE %s SET n = n + 1, v = v || 'u' WHERE id %% 7 = %d", tb, rr.Intn(7))
			default:
				sql = fmt.Sprintf("DELETE FROM %s WHERE id %% 11 = %d", tb, rr.Intn(11))
			}
			if _, err := conn.Exec(ctx, sql); err != nil {
				return fmt.Errorf("client %d: %s: %w", c, sql, err)
			}
		}
		return nil
	}
	truncates := 0
	for round := 0; round < rounds; round++ {
		var wg sync.WaitGroup
		errs := make([]error, clients)
		for c := 0; c < clients; c++ {
			rr := rand.New(rand.NewSource(seed*100 + int64(round*clients+c)))
			wg.Add(1)
			go func() { defer wg.Done(); errs[c] = burst(c, rr) }()
		}
		// The TRUNCATE runs while the bursts do, or between them.
		if rng.Intn(2) == 0 {
			wg.Wait()
		}
		var victims []string
		for _, tb := range tables {
			if rng.Intn(3) == 0 {
				victims = append(victims, tb)
			}
		}
		if len(victims) == 0 {
			victims = []string{tables[1+rng.Intn(len(tables)-1)]}
		}
		stmt := "TRUNCATE " + victims[0]
		for _, v := range victims[1:] {
			stmt += ", " + v
		}
		if rng.Intn(3) == 0 {
			// Rows of the new heap in the TRUNCATE's own transaction.
			stmt = fmt.Sprintf("BEGIN; %s; INSERT INTO %s VALUES (%d, 'after', 1); COMMIT", stmt, victims[0], -round-1)
		}
		if _, err := conns[clients].Exec(ctx, stmt); err != nil {
			t.Fatalf("round %d: %s: %v", round, stmt, err)
		}
		truncates += len(victims)
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d rounds, %d tables truncated (seed %d)", rounds, truncates, seed)
	r.src.Exec(t, "CREATE TABLE tr_marker (id int PRIMARY KEY); INSERT INTO tr_marker VALUES (1)")
	r.waitCH(t, run, fmt.Sprintf("SELECT count() FROM %s FINAL WHERE _is_deleted = 0", chTable("public", "tr_marker")), "1", 3*time.Minute)
	r.waitLoadsDone(t, run, nil, 0, 3*time.Minute)
	run.stop(t)
	r.compareAll(t)
}
