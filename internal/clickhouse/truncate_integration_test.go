package clickhouse

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
)

// TestRestartAfterTruncateDropRename: what a SIGKILL of ClickHouse 18.16
// right after each statement, with readers on every table, brings back.
// A TRUNCATE alone: the rows before it (the control); TRUNCATE followed by
// DeleteBefore: nothing once the server has applied the mutation to the
// parts it loaded again, which Boot (a restart), UnfinishedMutations and
// TruncateBarrier tell. DROP TABLE and a RENAME swap: nothing (the doc's
// "Restarts").
func TestRestartAfterTruncateDropRename(t *testing.T) {
	ch := testrig.StartClickHouse(t)
	c := openTestConn(t, ch)
	ctx := context.Background()
	exec := func(sql string) {
		t.Helper()
		if err := c.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	count := func(table string) string {
		t.Helper()
		out, err := ch.Query(ctx, "SELECT count() FROM restart_db."+table)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// Boot costs one round trip: a batch reads it at most once a second.
	const readings = 200
	var slowest time.Duration
	started := time.Now()
	first, err := c.Boot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range readings {
		t0 := time.Now()
		b, err := c.Boot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		slowest = max(slowest, time.Since(t0))
		if b.After(first) || first.After(b) {
			t.Fatalf("two readings of one server's boot tell a restart: %+v, %+v", first, b)
		}
	}
	t.Logf("Boot: %v a reading on average over %d, the slowest %v", time.Since(started)/readings, readings, slowest)

	exec("CREATE DATABASE restart_db")
	tables := []string{"barrier", "control", "dropped", "renamed", "fresh"}
	for _, name := range tables {
		exec("CREATE TABLE restart_db." + name + " (k UInt64, _lsn UInt64) ENGINE = ReplacingMergeTree(_lsn) ORDER BY k")
	}
	for i := 1; i <= 20; i++ {
		for _, name := range tables[:4] {
			exec(fmt.Sprintf("INSERT INTO restart_db.%s SELECT number + %d, %d FROM numbers(640)", name, 1000*i, i))
		}
	}
	exec("INSERT INTO restart_db.fresh SELECT number, 50 FROM numbers(5)")

	readCtx, stopReaders := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, name := range tables[:4] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for readCtx.Err() == nil {
				if _, err := ch.Query(readCtx, "SELECT count(), sleep(3) FROM restart_db."+name); err != nil {
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	defer func() { stopReaders(); wg.Wait() }()
	time.Sleep(500 * time.Millisecond)

	// Each statement waits for the readers of its table: all at once.
	target := Target{Database: "restart_db", Table: "barrier"}
	steps := map[string][]string{
		"barrier": {TruncateTable(target), DeleteBefore(target, 100), "INSERT INTO restart_db.barrier SELECT number, 200 FROM numbers(10)"},
		"control": {TruncateTable(Target{Database: "restart_db", Table: "control"}), "INSERT INTO restart_db.control SELECT number, 200 FROM numbers(10)"},
		"dropped": {DropTable(Target{Database: "restart_db", Table: "dropped"})},
		"renamed": {"RENAME TABLE restart_db.renamed TO restart_db.renamed_old, restart_db.fresh TO restart_db.renamed", DropTable(Target{Database: "restart_db", Table: "renamed_old"})},
	}
	errs := make(chan error, len(steps))
	applied := time.Now()
	for _, stmts := range steps {
		go func() {
			for _, s := range stmts {
				if err := c.Exec(ctx, s); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range steps {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("statements applied in %v (each waited for its table's reader)", time.Since(applied).Round(time.Millisecond))
	if got := count("barrier"); got != "10" {
		t.Fatalf("barrier holds %s rows after the TRUNCATE and 10 inserts", got)
	}
	var commands []string
	rows, err := c.Native().Query(ctx, "SELECT command FROM system.mutations WHERE database = 'restart_db' AND table = 'barrier'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		commands = append(commands, s)
	}
	rows.Close()
	if len(commands) != 1 || !(Mutation{Command: commands[0]}).TruncateBarrier() {
		t.Fatalf("system.mutations lists %q for barrier, want one truncate barrier", commands)
	}
	partsOnDisk := func(table string) int {
		parts, _ := filepath.Glob(filepath.Join(ch.Dir(), "data", "data", "restart_db", table, "all_*"))
		return len(parts)
	}
	barrierParts, controlParts := partsOnDisk("barrier"), partsOnDisk("control")
	before, err := c.Boot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch.KillServer(t)
	stopReaders()
	wg.Wait()
	t.Logf("killed with %d part directories of barrier and %d of control on disk", barrierParts, controlParts)
	ch.StartServer(t)

	after, err := c.Boot(ctx) // (the pool's connections are dead: a new one)
	if err != nil {
		t.Fatal(err)
	}
	if !after.After(before) {
		t.Errorf("the restart is not told: boot %v..%v before, %v..%v after", before.Earliest, before.Latest, after.Earliest, after.Latest)
	}
	// The restarted server shows the rows it loaded again until it has
	// applied the mutation to their parts.
	waited := time.Now()
	firstLook := ""
	for {
		ms, err := c.UnfinishedMutations(ctx, []Target{target, {Database: "restart_db", Table: "control"}})
		if err != nil {
			t.Fatal(err)
		}
		pending := 0
		for _, m := range ms {
			if m.TruncateBarrier() {
				pending++
			}
		}
		if firstLook == "" {
			firstLook = fmt.Sprintf("%d truncate barrier(s) unfinished, barrier holding %s rows", pending, count("barrier"))
		}
		if pending == 0 {
			break
		}
		if time.Since(waited) > time.Minute {
			t.Fatalf("the truncate barrier is still unfinished a minute after the restart: %+v", ms)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("after the restart: %s at first; no barrier unfinished after %v", firstLook, time.Since(waited).Round(time.Millisecond))
	if got := count("barrier"); got != "10" {
		t.Errorf("barrier (TRUNCATE, then DeleteBefore) holds %s rows after the restart, want the 10 written after the TRUNCATE", got)
	}
	switch got := count("control"); {
	case controlParts > 0 && got == "10":
		t.Errorf("control (TRUNCATE alone) holds only its 10 rows after the restart though %d part directories were on disk: the server no longer brings back what a TRUNCATE under a reader left (the test shows nothing)", controlParts)
	case got != "10":
		t.Logf("control (TRUNCATE alone) holds %s rows after the restart: the rows before the TRUNCATE came back", got)
	default:
		t.Logf("control: its parts were removed before the kill; nothing came back to show")
	}
	if out, err := ch.Query(ctx, "SELECT name FROM system.tables WHERE database = 'restart_db' ORDER BY name"); err != nil {
		t.Fatal(err)
	} else if names := strings.Fields(out); strings.Join(names, " ") != "barrier control renamed" {
		t.Errorf("tables after the restart: %q, want barrier control renamed (the dropped table gone, the swap kept)", names)
	}
	if got := count("renamed"); got != "5" {
		t.Errorf("renamed holds %s rows after the restart, want the 5 of the table swapped in", got)
	}
}
