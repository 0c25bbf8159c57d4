package processor_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/msg"
	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/processor"
)

// rawConsumer keeps every row message's metadata and payload.
type rawConsumer struct {
	mu   sync.Mutex
	msgs []rawMessage
	errs []error
}

type rawMessage struct {
	meta    map[string]string
	payload map[string]any
}

func (c *rawConsumer) consume(_ context.Context, batch service.MessageBatch) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range batch {
		meta := msg.Strings(m)
		op := meta[processor.MetaOperation]
		if op == "" || op == processor.OperationSchema {
			continue
		}
		raw, err := m.AsStructured()
		if err != nil {
			if op != processor.OperationTruncate {
				c.errs = append(c.errs, fmt.Errorf("%s at %s: %w", op, meta[processor.MetaLSN], err))
			}
			raw = map[string]any{}
		}
		p, _ := raw.(map[string]any)
		c.msgs = append(c.msgs, rawMessage{meta, p})
	}
	return nil
}

func (c *rawConsumer) snapshot() ([]rawMessage, []error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]rawMessage(nil), c.msgs...), append([]error(nil), c.errs...)
}

// TestDecodeNoReplicaIdentityByTID streams UPDATEs and DELETEs of tables
// without a usable replica identity (no primary key; REPLICA IDENTITY
// NOTHING): the session keeps going, and replaying the row messages by
// (walshadow_filenode, walshadow_tid) gives exactly the source's rows at
// their ctids. After VACUUM FULL the rows carry the new filenode. A
// temporary table produces nothing.
func TestDecodeNoReplicaIdentityByTID(t *testing.T) {
	src := testrig.StartPostgres(t, testrig.WithSetting("log_min_error_statement", "panic"))
	bridgeDir := buildPgext(t, src.BinDir())
	stateDir := newStateDir(t, src)
	const slot = "walshadow_noident"
	yaml := pipelineYAML(src, stateDir, bridgeDir, testrig.FreePort(t), slot)
	consumer := &rawConsumer{}
	b := service.NewStreamBuilder()
	b.SetSchema(service.GlobalEnvironment().FullConfigSchema("", ""))
	if err := b.SetYAML(yaml); err != nil {
		t.Fatal(err)
	}
	if err := b.AddBatchConsumerFunc(consumer.consume); err != nil {
		t.Fatal(err)
	}
	stream, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- stream.Run(context.Background()) }()
	defer stream.StopWithin(time.Minute)
	waitSlotActive(t, src, slot, runErr)

	src.Exec(t, `CREATE TABLE nk (x int, y text);
CREATE TABLE nn (x int, y text);
ALTER TABLE nn REPLICA IDENTITY NOTHING;
CREATE TABLE id_marker (id int PRIMARY KEY, token text)`)
	src.Exec(t, `CREATE TEMP TABLE scratch (x int); INSERT INTO scratch SELECT generate_series(1, 100); UPDATE scratch SET x = x + 1; DELETE FROM scratch`)
	for _, tbl := range []string{"nk", "nn"} {
		src.Exec(t, "INSERT INTO "+tbl+" SELECT g, 'r' || g FROM generate_series(1, 500) g")
		src.Exec(t, "UPDATE "+tbl+" SET y = y || '!' WHERE x % 3 = 0")              // mostly HOT
		src.Exec(t, "UPDATE "+tbl+" SET y = repeat('wide ', 200) WHERE x % 50 = 7") // to other pages
		src.Exec(t, "DELETE FROM "+tbl+" WHERE x % 5 = 0")
		src.Exec(t, "BEGIN; UPDATE "+tbl+" SET x = -x WHERE x < 20; DELETE FROM "+tbl+" WHERE x = -3; COMMIT")
		src.Exec(t, "COPY "+tbl+" (x) FROM PROGRAM 'seq 1000 1010'")
	}
	marker := func(token string) {
		src.Exec(t, "INSERT INTO id_marker VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET token = EXCLUDED.token", token)
		deadline := time.Now().Add(2 * time.Minute)
		for {
			msgs, _ := consumer.snapshot()
			for _, m := range msgs {
				if m.meta[processor.MetaTable] == "id_marker" && m.payload["token"] == token {
					return
				}
			}
			select {
			case err := <-runErr:
				t.Fatalf("the stream stopped: %v", err)
			case <-time.After(200 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("marker %q did not arrive", token)
			}
		}
	}
	marker("first")

	// source rows by "filenode/block:offset"
	sourceRows := func(tbl string) map[string]string {
		out := map[string]string{}
		fn := src.QueryInt(t, "SELECT pg_relation_filenode($1::regclass)::int8", tbl)
		rows, err := src.Connect(t).Query(context.Background(), "SELECT ctid::text, x, coalesce(y, '<nil>') FROM "+tbl)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var ctid, y string
			var x int64
			if err := rows.Scan(&ctid, &x, &y); err != nil {
				t.Fatal(err)
			}
			blk, off, _ := strings.Cut(strings.Trim(ctid, "()"), ",")
			out[fmt.Sprintf("%d/%s:%s", fn, blk, off)] = fmt.Sprintf("%d|%s", x, y)
		}
		return out
	}
	// replay applies the table's row messages by physical identity; in the
	// filenode rewritten (lenient) the rewrite's rows were never row
	// changes, so an update or delete may name a tuple the replay lacks.
	replay := func(tbl, lenient string) map[string]string {
		msgs, errs := consumer.snapshot()
		for _, err := range errs {
			t.Error(err)
		}
		state := map[string]string{}
		for _, m := range msgs {
			if m.meta[processor.MetaTable] != tbl {
				continue
			}
			op, fn := m.meta[processor.MetaOperation], m.meta[processor.MetaFilenode]
			tid, old := fn+"/"+m.meta[processor.MetaTID], fn+"/"+m.meta[processor.MetaOldTID]
			switch op {
			case processor.OperationInsert:
				state[tid] = fmt.Sprintf("%v|%v", m.payload["x"], m.payload["y"])
			case processor.OperationUpdate:
				if _, ok := state[old]; !ok && fn != lenient {
					t.Errorf("%s: update at %s of tuple %s, not live", tbl, m.meta[processor.MetaLSN], old)
				}
				delete(state, old)
				state[tid] = fmt.Sprintf("%v|%v", m.payload["x"], m.payload["y"])
			case processor.OperationDelete:
				if _, ok := state[tid]; !ok && fn != lenient {
					t.Errorf("%s: delete at %s of tuple %s, not live", tbl, m.meta[processor.MetaLSN], tid)
				}
				if len(m.payload) != 0 {
					t.Errorf("%s: delete at %s carries columns %v", tbl, m.meta[processor.MetaLSN], m.payload)
				}
				delete(state, tid)
			case processor.OperationFail:
				t.Errorf("%s failed: %s", tbl, m.meta[processor.MetaError])
			case processor.OperationTruncate:
				state = map[string]string{}
			}
			if op == processor.OperationUpdate || op == processor.OperationInsert || op == processor.OperationDelete {
				if _, err := msg.ParseTID(m.meta[processor.MetaTID]); err != nil {
					t.Errorf("%s: %v", tbl, err)
				}
			}
		}
		return state
	}
	for _, tbl := range []string{"nk", "nn"} {
		got, want := replay(tbl, ""), sourceRows(tbl)
		if len(got) != len(want) {
			t.Errorf("%s: %d rows replayed by TID, the source has %d", tbl, len(got), len(want))
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: tuple %s replayed as %q, the source has %q", tbl, k, got[k], v)
			}
		}
	}
	msgs, _ := consumer.snapshot()
	for _, m := range msgs {
		if m.meta[processor.MetaTable] == "scratch" {
			t.Fatalf("a temporary table's change came out: %v", m.meta)
		}
	}

	// A rewrite starts a new generation: later rows carry its filenode.
	oldFn := src.QueryInt(t, "SELECT pg_relation_filenode('nk')::int8")
	src.Exec(t, "VACUUM FULL nk")
	newFn := src.QueryInt(t, "SELECT pg_relation_filenode('nk')::int8")
	if newFn == oldFn {
		t.Fatal("VACUUM FULL kept the filenode")
	}
	src.Exec(t, "INSERT INTO nk VALUES (7777, 'after rewrite')")
	src.Exec(t, "UPDATE nk SET y = 'rewritten' WHERE x = -1")
	marker("second")
	state := replay("nk", fmt.Sprint(newFn))
	source := sourceRows("nk")
	n := 0
	for k, v := range state {
		if !strings.HasPrefix(k, fmt.Sprint(newFn)+"/") {
			continue
		}
		n++
		if source[k] != v {
			t.Errorf("nk after VACUUM FULL: tuple %s replayed as %q, the source has %q", k, v, source[k])
		}
	}
	if n != 2 {
		t.Errorf("nk: %d rows in the new filenode %d, want the insert and the update", n, newFn)
	}
}
