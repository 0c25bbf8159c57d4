package clickhouse

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
)

// BenchmarkShardedInsert measures the two ways a batch can reach a
// two-shard cluster durably, alternately in each iteration (which goes
// first alternates too): `distributed`, what Conn does, one INSERT into
// the Distributed table with insert_distributed_sync = 1 (the node in use
// splits the block by the sharding key and returns once every shard
// wrote its part); `local`, the rows split in the client and each half
// inserted into its shard's local table by a connection to that shard,
// both at once. The local path's split here is by parity, not by the
// sharding key, so it is charged nothing for the routing walshadow would
// have to do (hashing every key the way ClickHouse's sipHash64 over
// toString does): its figure is the best that path could do. Each writes
// WALSHADOW_BENCH_ROWS rows (200,000 by default) into its emptied table
// and checks that the cluster holds every row. Metrics: rows/s per path
// and distributed-x-slower (the distributed path's wall time over the
// local one's, over all iterations).
func BenchmarkShardedInsert(b *testing.B) {
	n := 200_000
	if v := os.Getenv("WALSHADOW_BENCH_ROWS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 2 {
			b.Fatalf("WALSHADOW_BENCH_ROWS=%q: want a number of rows", v)
		}
	}
	cluster := testrig.StartClickHouseCluster(b, testrig.TwoShards)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	conn, err := Open(ctx, ConnConfig{DSN: cluster.NodeDSN(0, "default"), Cluster: testrig.ClusterName})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	shards := make([]*Conn, len(cluster.Nodes))
	for i := range cluster.Nodes {
		if shards[i], err = Open(ctx, ConnConfig{DSN: cluster.NodeDSN(i, "default")}); err != nil {
			b.Fatal(err)
		}
		defer shards[i].Close()
	}
	id := ColumnSpec{Name: "id", Type: ColumnType{Type: "Int64", Repr: ReprInt}}
	v := ColumnSpec{Name: "v", Type: ColumnType{Type: "String", Repr: ReprString}}
	cols := []ColumnSpec{id, v, {Name: ColLSN, Type: ColumnType{Type: "UInt64", Repr: ReprInt}}}
	create, err := CreateDatabase("bench")
	if err != nil {
		b.Fatal(err)
	}
	if err := conn.Exec(ctx, create); err != nil {
		b.Fatal(err)
	}
	dist, local := Target{Database: "bench", Table: "public.dist"}, Target{Database: "bench", Table: "public.local"}
	for _, t := range []Target{dist, local} {
		sql, err := CreateTable(conn.Dialect(), t, []ColumnSpec{id, v}, []string{"id"}, TableOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if err := conn.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
	rows := make([][]any, n)
	halves := [2][][]any{}
	for i := range rows {
		rows[i] = []any{int64(i), fmt.Sprintf("row %d %s", i, strings.Repeat("x", 40)), uint64(i + 1)}
		halves[i%2] = append(halves[i%2], rows[i])
	}
	var distWall, localWall time.Duration
	measure := func(wall *time.Duration, t Target, write func() error) {
		if err := conn.Exec(ctx, TruncateTable(t)); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := write(); err != nil {
			b.Fatal(err)
		}
		*wall += time.Since(start)
		var got uint64
		if err := conn.Native().QueryRow(ctx, "SELECT count() FROM "+QuoteQualified(t)).Scan(&got); err != nil {
			b.Fatal(err)
		}
		if got != uint64(n) {
			b.Fatalf("%s holds %d rows right after writing %d", QuoteQualified(t), got, n)
		}
	}
	writeDistributed := func() {
		measure(&distWall, dist, func() error { return conn.Insert(ctx, dist, cols, rows) })
	}
	writeLocal := func() {
		measure(&localWall, local, func() error {
			var wg sync.WaitGroup
			errs := make([]error, len(shards))
			for i, s := range shards {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = s.Insert(ctx, LocalTarget(local), cols, halves[i])
				}()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	b.ResetTimer()
	for run := range b.N {
		if run%2 == 0 {
			writeDistributed()
			writeLocal()
		} else {
			writeLocal()
			writeDistributed()
		}
	}
	b.StopTimer()
	total := float64(n) * float64(b.N)
	b.ReportMetric(total/distWall.Seconds(), "distributed-rows/s")
	b.ReportMetric(total/localWall.Seconds(), "local-rows/s")
	ratio := distWall.Seconds() / localWall.Seconds()
	b.ReportMetric(ratio, "distributed-x-slower")
	b.Logf("%d rows, %d iterations into two shards: insert_distributed_sync %.0f rows/s, local tables directly %.0f rows/s (routing not charged): the Distributed insert takes %.2fx the time",
		n, b.N, total/distWall.Seconds(), total/localWall.Seconds(), ratio)
}
