package source

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// clientTestTimeout bounds each integration test.
const clientTestTimeout = 3 * time.Minute

func clientTestContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), clientTestTimeout)
	t.Cleanup(cancel)
	return ctx
}

func clientTestConnect(t *testing.T, ctx context.Context, dsn string) *Client {
	t.Helper()
	c, err := Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// segmentStart rounds l down to its segment boundary.
func segmentStart(l wal.LSN, segSize uint64) wal.LSN { return l - l%wal.LSN(segSize) }

// receiveThrough receives until the client has delivered every byte before
// target, returning the bytes when keep is set.
func receiveThrough(t *testing.T, ctx context.Context, c *Client, target wal.LSN, keep bool) []byte {
	t.Helper()
	var out []byte
	for c.Next() < target {
		ch, err := c.Receive(ctx)
		if err != nil {
			t.Fatalf("Receive at %s (target %s): %v", c.Next(), target, err)
		}
		if keep {
			out = append(out, ch.Data...)
		}
	}
	return out
}

// waitUntil polls cond every 50 ms until it holds or timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s; last: %s", timeout, what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// replicationRow is the walsender's pg_stat_replication row (NULL LSNs as
// 0, reply_time as text).
type replicationRow struct {
	write, flush, replay wal.LSN
	replyTime            string
}

func statReplication(t *testing.T, pg *testrig.Postgres, pid uint32) (replicationRow, bool) {
	t.Helper()
	var w, f, r, rt *string
	err := pg.QueryRow(t, `SELECT write_lsn::text, flush_lsn::text, replay_lsn::text, reply_time::text
		FROM pg_stat_replication WHERE pid = $1`, int64(pid)).Scan(&w, &f, &r, &rt)
	if err != nil {
		return replicationRow{}, false
	}
	lsn := func(s *string) wal.LSN {
		if s == nil {
			return 0
		}
		l, err := wal.ParseLSN(*s)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	row := replicationRow{write: lsn(w), flush: lsn(f), replay: lsn(r), replyTime: "NULL"}
	if rt != nil {
		row.replyTime = *rt
	}
	return row, true
}

func (r replicationRow) positions() Positions { return Positions{r.write, r.flush, r.replay} }

func TestClientAgainstPostgres(t *testing.T) {
	pg := testrig.StartPostgres(t)
	ctx := clientTestContext(t)
	segSize := pg.WALSegmentSize()

	t.Run("identify", func(t *testing.T) {
		c := clientTestConnect(t, ctx, pg.DSN())
		id, err := c.IdentifySystem(ctx)
		if err != nil {
			t.Fatal(err)
		}
		after := pg.CurrentLSN(t)
		wantSys := pg.QueryString(t, "SELECT system_identifier::text FROM pg_control_system()")
		wantTLI := pg.QueryInt(t, "SELECT timeline_id FROM pg_control_checkpoint()")
		if strconv.FormatUint(id.SystemID, 10) != wantSys || int64(id.Timeline) != wantTLI {
			t.Errorf("identity %v, want system %s timeline %d", id, wantSys, wantTLI)
		}
		if id.XLogPos == 0 || id.XLogPos > after || id.DBName != "" {
			t.Errorf("identity %v: xlogpos not in (0, %s] or a database on a physical connection", id, after)
		}
		v, err := c.ServerVersion(ctx)
		if err != nil || strconv.Itoa(v) != pg.QueryString(t, "SHOW server_version_num") || v < 150000 {
			t.Errorf("ServerVersion = %d, %v", v, err)
		}
		if n, err := c.WALSegmentSize(ctx); err != nil || n != segSize {
			t.Errorf("WALSegmentSize = %d, %v; want %d", n, err, segSize)
		}
		if d, err := c.WALSenderTimeout(ctx); err != nil || d != time.Minute {
			t.Errorf("WALSenderTimeout = %v, %v; want the default 1m", d, err)
		}
		if app := pg.QueryString(t, "SELECT backend_type || ' ' || application_name FROM pg_stat_activity WHERE pid = $1", int64(c.ReplicationPID())); app != "walsender walshadow" {
			t.Errorf("replication backend shows as %q, want a walsender named walshadow", app)
		}
	})

	t.Run("slot", func(t *testing.T) {
		c := clientTestConnect(t, ctx, pg.DSN())
		created, err := c.EnsureSlot(ctx, "ws_slot")
		if err != nil || !created {
			t.Fatalf("first EnsureSlot: created=%v err=%v", created, err)
		}
		created, err = c.EnsureSlot(ctx, "ws_slot")
		if err != nil || created {
			t.Fatalf("second EnsureSlot: created=%v err=%v", created, err)
		}
		typ := pg.QueryString(t, "SELECT slot_type || ' ' || (restart_lsn IS NOT NULL)::text FROM pg_replication_slots WHERE slot_name = 'ws_slot'")
		if typ != "physical true" {
			t.Errorf("slot type and reserved WAL = %q, want physical with a restart_lsn (RESERVE_WAL)", typ)
		}
		pg.Exec(t, "SELECT pg_create_logical_replication_slot('ws_logical', 'pgoutput')")
		_, err = c.EnsureSlot(ctx, "ws_logical")
		if err == nil || !strings.Contains(err.Error(), "logical") || !strings.Contains(err.Error(), "physical") {
			t.Fatalf("EnsureSlot over a logical slot: %v", err)
		}
		t.Logf("logical slot refused: %v", err)
		// The connection is still usable after the refused CREATE.
		if _, err := c.IdentifySystem(ctx); err != nil {
			t.Fatalf("IDENTIFY_SYSTEM after the refused slot: %v", err)
		}
		if _, err := c.EnsureSlot(ctx, "Bad-Name"); err == nil {
			t.Fatal("an invalid slot name was accepted")
		}
		pg.Exec(t, "SELECT pg_drop_replication_slot('ws_logical')")
	})

	t.Run("status", func(t *testing.T) {
		c := clientTestConnect(t, ctx, pg.DSN())
		if _, err := c.EnsureSlot(ctx, "ws_status"); err != nil {
			t.Fatal(err)
		}
		start := segmentStart(pg.CurrentLSN(t), segSize)
		if err := c.StartReplication(ctx, "ws_status", start, 0); err != nil {
			t.Fatal(err)
		}
		target := pg.CurrentLSN(t)
		receiveThrough(t, ctx, c, target, false)
		pid := c.ReplicationPID()

		// Distinct values, apply < flush < write, all already received.
		w, f, a := c.Next(), start+0x200, start+0x100
		c.SetPositions(w, f, a)
		if err := c.SendStatus(ctx, true); err != nil {
			t.Fatal(err)
		}
		want := Positions{Write: w, Flush: f, Apply: a}
		var row replicationRow
		waitUntil(t, 10*time.Second, "pg_stat_replication to show the status", func() (bool, string) {
			r, ok := statReplication(t, pg, pid)
			row = r
			return ok && r.positions() == want, fmt.Sprintf("%+v", r)
		})
		pg.WaitForLSN(t, "SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = 'ws_status'",
			func(l wal.LSN) bool { return l == f }, 10*time.Second)

		// Lower values do not regress anything.
		c.SetPositions(start, start, start)
		if got := c.Positions(); got != (Positions{w, f, a}) {
			t.Fatalf("positions after lower values = %v", got)
		}
		sendAndWaitReply := func() replicationRow {
			prev := row.replyTime
			if err := c.SendStatus(ctx, false); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, 10*time.Second, "a newer reply_time", func() (bool, string) {
				r, ok := statReplication(t, pg, pid)
				row = r
				return ok && r.replyTime != prev, fmt.Sprintf("%+v", r)
			})
			return row
		}
		time.Sleep(5 * time.Millisecond) // a distinct reply_time
		if r := sendAndWaitReply(); r.positions() != want {
			t.Fatalf("after lower values the source shows %+v, want %v", r, want)
		}

		// Write advances alone: flush and apply are not dragged along.
		pg.Exec(t, "CREATE TABLE status_load AS SELECT g FROM generate_series(1, 1000) g")
		receiveThrough(t, ctx, c, pg.CurrentLSN(t), false)
		w2 := c.Next()
		c.SetPositions(w2, start, 0)
		time.Sleep(5 * time.Millisecond)
		want.Write = w2
		if r := sendAndWaitReply(); r.positions() != want {
			t.Fatalf("after a write-only advance the source shows %+v, want %v", r, want)
		}
		if got := pg.QueryLSN(t, "SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = 'ws_status'"); got != f {
			t.Fatalf("slot restart_lsn = %s, want the flush position %s", got, f)
		}

		// Flush advances: the slot follows.
		c.SetPositions(0, w2, 0)
		if err := c.SendStatus(ctx, false); err != nil {
			t.Fatal(err)
		}
		pg.WaitForLSN(t, "SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = 'ws_status'",
			func(l wal.LSN) bool { return l == w2 }, 10*time.Second)
	})

	t.Run("keepalive and slotless", func(t *testing.T) {
		// A walsender asks for a reply after half of wal_sender_timeout of
		// silence and drops the standby after all of it. With status
		// updates every hour, only answered keepalives keep us connected.
		pg.SetConf(t, "wal_sender_timeout", "2s")
		defer pg.SetConf(t, "wal_sender_timeout", "60s")
		c := clientTestConnect(t, ctx, pg.DSN())
		if d, err := c.WALSenderTimeout(ctx); err != nil || d != 2*time.Second {
			t.Fatalf("WALSenderTimeout = %v, %v", d, err)
		}
		c.StatusInterval = time.Hour
		start := segmentStart(pg.CurrentLSN(t), segSize)
		if err := c.StartReplication(ctx, "", start, 0); err != nil {
			t.Fatal(err)
		}
		pid := c.ReplicationPID()
		var first replicationRow
		waitUntil(t, 10*time.Second, "the initial status", func() (bool, string) {
			r, ok := statReplication(t, pg, pid)
			first = r
			return ok && r.replyTime != "NULL", fmt.Sprintf("%+v", r)
		})
		idle, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		for {
			_, err := c.Receive(idle)
			if errors.Is(err, context.DeadlineExceeded) {
				break
			}
			if err != nil {
				t.Fatalf("stream died while idle (keepalives unanswered?): %v", err)
			}
		}
		r, ok := statReplication(t, pg, pid)
		if !ok || r.replyTime == first.replyTime {
			t.Fatalf("after 5 s of silence the walsender shows %+v (present %v); initial reply %s", r, ok, first.replyTime)
		}
		if slot := pg.QueryString(t, "SELECT coalesce((SELECT slot_name::text FROM pg_replication_slots WHERE active_pid = $1), 'none')", int64(pid)); slot != "none" {
			t.Errorf("slotless stream uses slot %q", slot)
		}
		// The stream is still usable after the caller's deadline.
		pg.Exec(t, "CREATE TABLE keepalive_load (i int)")
		receiveThrough(t, ctx, c, pg.CurrentLSN(t), false)
	})

	t.Run("scram", func(t *testing.T) {
		const role, password, wrong = "ws_scram", "c0rrect-h0rse:b@ttery/st@ple", "wr0ng-passw0rd"
		pg.Exec(t, fmt.Sprintf("CREATE ROLE %s LOGIN REPLICATION PASSWORD '%s'", role, password))
		if enc := pg.QueryString(t, "SELECT left(rolpassword, 13) FROM pg_authid WHERE rolname = $1", role); enc != "SCRAM-SHA-256" {
			t.Fatalf("stored password is %q..., want SCRAM-SHA-256", enc)
		}
		hbaPath := filepath.Join(pg.DataDir(), "pg_hba.conf")
		hba, err := os.ReadFile(hbaPath)
		if err != nil {
			t.Fatal(err)
		}
		rules := fmt.Sprintf("host all %[1]s 127.0.0.1/32 scram-sha-256\nhost replication %[1]s 127.0.0.1/32 scram-sha-256\n", role)
		if err := os.WriteFile(hbaPath, append([]byte(rules), hba...), 0o600); err != nil {
			t.Fatal(err)
		}
		pg.Exec(t, "SELECT pg_reload_conf()")

		good := (&url.URL{Scheme: "postgres", User: url.UserPassword(role, password),
			Host: fmt.Sprintf("127.0.0.1:%d", pg.Port()), Path: "/postgres", RawQuery: "sslmode=disable"}).String()
		bad := fmt.Sprintf("host=127.0.0.1 port=%d user=%s password='%s' dbname=postgres sslmode=disable", pg.Port(), role, wrong)

		var connErr error
		waitUntil(t, 10*time.Second, "the wrong password to be refused (pg_hba reload)", func() (bool, string) {
			c, err := Connect(ctx, bad)
			if err == nil {
				c.Close(ctx)
				return false, "connected"
			}
			connErr = err
			return true, ""
		})
		msg := connErr.Error()
		t.Logf("wrong password: %v", connErr)
		if !strings.Contains(msg, "password authentication failed") || !strings.Contains(msg, "127.0.0.1") {
			t.Errorf("wrong-password error is not clear: %v", msg)
		}
		if strings.Contains(msg, wrong) || strings.Contains(msg, password) {
			t.Errorf("wrong-password error leaks a password: %v", msg)
		}
		if IsTransient(connErr) {
			t.Error("authentication failure classified as transient")
		}
		began := time.Now()
		_, err = OpenStream(ctx, StreamConfig{DSN: bad}, 0)
		if err == nil || IsTransient(err) || time.Since(began) > 5*time.Second || strings.Contains(err.Error(), wrong) {
			t.Errorf("OpenStream with a wrong password: %v after %v (want a prompt, fatal, redacted error)", err, time.Since(began))
		}

		c := clientTestConnect(t, ctx, good)
		if user := pg.QueryString(t, "SELECT usename::text || ' ' || coalesce(application_name, '') FROM pg_stat_activity WHERE pid = $1", int64(c.ReplicationPID())); user != role+" walshadow" {
			t.Errorf("replication backend runs as %q", user)
		}
		start := segmentStart(pg.CurrentLSN(t), segSize)
		if err := c.StartReplication(ctx, "", start, 0); err != nil {
			t.Fatal(err)
		}
		receiveThrough(t, ctx, c, pg.CurrentLSN(t), false)
	})

	t.Run("removed WAL", func(t *testing.T) {
		for _, s := range []string{"ws_slot", "ws_status"} {
			pg.Exec(t, "SELECT pg_drop_replication_slot($1)", s)
		}
		pg.SetConf(t, "wal_keep_size", "0")
		old := segmentStart(pg.CurrentLSN(t), segSize)
		oldFile := pg.QueryString(t, "SELECT pg_walfile_name($1::text::pg_lsn)", old.String())
		for i := 0; i < 3; i++ {
			pg.Exec(t, "CREATE TABLE IF NOT EXISTS removal_load (i int); INSERT INTO removal_load VALUES (1)")
			pg.SwitchWAL(t)
			pg.Checkpoint(t)
		}
		if n := pg.QueryInt(t, "SELECT count(*) FROM pg_ls_waldir() WHERE name = $1", oldFile); n != 0 {
			t.Fatalf("segment %s still in pg_wal", oldFile)
		}
		began := time.Now()
		s, err := OpenStream(ctx, StreamConfig{DSN: pg.DSN()}, old)
		if err == nil {
			_, err = s.Receive(ctx)
			s.Close(ctx)
		}
		var removed *WALRemovedError
		if !errors.As(err, &removed) || removed.LSN != old {
			t.Fatalf("resuming at removed WAL: %v", err)
		}
		t.Logf("removed WAL: %v", err)
		if !strings.Contains(err.Error(), old.String()) || !strings.Contains(err.Error(), "wal_keep_size") || IsTransient(err) {
			t.Errorf("removed-WAL error lacks the LSN or the remedy, or is transient: %v", err)
		}
		if time.Since(began) > 5*time.Second {
			t.Errorf("a removed segment was retried for %v", time.Since(began))
		}
	})

	t.Run("fast shutdown with a lagging flush", func(t *testing.T) {
		// A stopping walsender waits for the standby's flush to reach what
		// it sent; walshadow's flush (its resume floor) may lag for long,
		// so the client must let the source stop.
		c := clientTestConnect(t, ctx, pg.DSN())
		start := segmentStart(pg.CurrentLSN(t), segSize)
		if err := c.StartReplication(ctx, "", start, 0); err != nil {
			t.Fatal(err)
		}
		pg.Exec(t, "CREATE TABLE shutdown_load AS SELECT g FROM generate_series(1, 1000) g")
		receiveThrough(t, ctx, c, pg.CurrentLSN(t), false)
		c.SetPositions(c.Next(), start, start)
		errc := make(chan error, 1)
		go func() {
			for {
				if _, err := c.Receive(ctx); err != nil {
					errc <- err
					return
				}
			}
		}()
		began := time.Now()
		pg.Restart(t)
		took := time.Since(began)
		err := <-errc
		t.Logf("restart took %v; the stream ended with: %v", took, err)
		if !errors.Is(err, errClientSourceStopping) || !IsTransient(err) {
			t.Errorf("stream ended with %v, want the transient source-stopping error", err)
		}
		if took > 20*time.Second {
			t.Errorf("the source took %v to restart: its walsender waited for our flush", took)
		}
	})
}
