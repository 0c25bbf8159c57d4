// Package catchup is what the e2e drills share to wait for a walshadow
// child process: a marker committed on the source, the manifest's
// delivered position reaching it, the initial loads published.
package catchup

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/load"
	"github.com/walshadow/walshadow/internal/session"
	"github.com/walshadow/walshadow/internal/statefile"
	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// CommitMarker runs update (an UPDATE of a marker table) in its own
// transaction on dsn and returns a position its commit record comes after:
// a delivered commit LSN at or past it is the marker's or a later one.
func CommitMarker(t testing.TB, dsn, update string) wal.LSN {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connecting to the source: %v", err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, update); err != nil {
		t.Fatalf("updating the marker (%s): %v", update, err)
	}
	var text string
	if err := tx.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&text); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("committing the marker: %v", err)
	}
	lsn, err := wal.ParseLSN(text)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

// WaitDelivered polls stateDir's manifest until its delivered position is
// at least lsn; it fails t (saying what) when c exits or timeout passes,
// dumping c's goroutines into its log.
func WaitDelivered(t testing.TB, c *testrig.Child, stateDir string, lsn wal.LSN, timeout time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		m, err := session.ReadManifest(stateDir)
		switch {
		case err != nil:
			last = err.Error()
		case m == nil:
			last = "no manifest yet"
		case m.Delivered >= lsn:
			return
		default:
			last = fmt.Sprintf("delivered_lsn %s, received_lsn %s, shadow_replay_lsn %s", m.Delivered, m.Received, m.ShadowReplay)
		}
		if c.Exited() {
			t.Fatalf("%s: run %d exited (%v) (%s):\n%s", what, c.Run, c.Wait(), last, c.LogTail(80))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the manifest's delivered position did not reach %s within %v (%s):\n%s", what, lsn, timeout, last, Stalled(c))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitLoads waits until no initial load in stateDir's output ledger is
// pending: a table first seen at a start (created just before a kill, say)
// is loaded in the background, and until it is published its agreement is
// on its delta table.
func WaitLoads(t testing.TB, c *testrig.Child, stateDir string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var pending []string
		ledger, err := load.ReadLedger(string(statefile.StateDir(stateDir).Output()))
		if err == nil {
			for _, e := range ledger.All() {
				if e.Phase != load.PhaseDone {
					pending = append(pending, fmt.Sprintf("%s.%s (%s, attempt %d)", e.Schema, e.Table, e.Phase, e.Attempt))
				}
			}
			if len(pending) == 0 {
				return
			}
		}
		if c.Exited() {
			t.Fatalf("run %d exited (%v) with loads pending %v (%v):\n%s", c.Run, c.Wait(), pending, err, c.LogTail(80))
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %d: initial loads still pending after %v: %v (%v):\n%s", c.Run, timeout, pending, err, Stalled(c))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stalled dumps a stalled child's goroutines into its log and returns
// where to find them with the log's tail before the dump.
func Stalled(c *testrig.Child) string {
	before := c.LogTail(40)
	if !c.DumpGoroutines(10 * time.Second) {
		return before
	}
	return fmt.Sprintf("%s\n(goroutines of the stalled run dumped to %s)", before, c.LogPath)
}
