// Package bench holds the end-to-end benchmarks of the whole pipeline: a
// real PostgreSQL source, the catalog-only shadow and ClickHouse, walshadow
// running in a child process of the test binary as it does in the drills.
//
// BenchmarkBacklogVsPgoutput (go tool task bench:e2e) puts walshadow's
// catch-up of a pgbench backlog next to PostgreSQL's own logical decoding
// (pgoutput, consumed by pg_recvlogical) reading the very same WAL:
//
//  1. pgbench -i at WALSHADOW_BENCH_SCALE (default 10); walshadow starts,
//     loads every table, catches up, and is killed;
//  2. a publication FOR ALL TABLES and a pgoutput logical slot are made,
//     then pgbench -c 4 -j 2 -T WALSHADOW_BENCH_SECONDS (default 45) runs
//     with walshadow stopped, and a marker transaction is committed after
//     it: the backlog is the WAL from the slot to the marker;
//  3. walshadow starts again and is timed from its start until the
//     manifest's delivered position passes the marker (every backlog
//     transaction acknowledged by ClickHouse) with no load pending; its
//     CPU and peak RSS are read from /proc at that moment, its source-side
//     walsender sampled every 10 ms;
//  4. pg_recvlogical streams the logical slot up to the marker into a
//     tmpfs file, timed launch to exit, its walsender sampled likewise;
//  5. the four pgbench tables in ClickHouse are compared with the source
//     (count, exact sums, md5 of the canonical rows): a mismatch fails the
//     benchmark.
//
// The figures are reported as benchmark metrics and in one log summary;
// the ratio of the two times (walshadow/pgoutput) is the project's
// headline figure, with a goal of 0.5 or less. walshadow's time covers
// more work than pgoutput's (rows decoded, batched and applied to
// ClickHouse, against a protocol stream written to a file), and its CPU is
// the walshadow process's own: the shadow postmaster, a separate daemon,
// and ClickHouse are not in it.
//
// Beside the single server, a second walshadow on a slot and state of its
// own replays the same backlog into a cluster of two replicas of one shard
// (testrig.StartClickHouseCluster: ZooKeeper and two servers), bootstrapped
// in step 1 and timed in step 3 after the first; the ratio of the two
// times (walshadow-cluster-s / walshadow-s, "cluster/single") is what
// replication costs the output, and both cluster nodes are compared with
// the source. WALSHADOW_BENCH_CLUSTER=0 leaves the cluster out.
//
// WALSHADOW_BENCH_SESSION_YAML and WALSHADOW_BENCH_OUTPUT_YAML add fields to
// the walshadow resource and the clickhouse_ddl output (one per line), to
// compare settings in the same command.
//
// WALSHADOW_BENCH_PPROF=<dir> makes the timed walshadow run write a CPU
// profile of itself over the backlog to <dir>/walshadow-backlog.cpu.pprof,
// and its heap profile at its peak resident set to
// <dir>/walshadow-backlog.heap.pprof.
//
// BenchmarkCommitToVisible (go tool task bench:latency) measures how soon
// a committed row is readable in ClickHouse while walshadow follows a live
// source: a steady stream of one-row transactions beside a TPC-B mix, and
// one long transaction whose rows all appear after its COMMIT; see its
// doc for the shapes and what is reported.
//
// The package has no tests: go test ./... runs none of it.
package bench
