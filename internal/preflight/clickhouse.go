package preflight

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/walshadow/walshadow/internal/clickhouse"
)

// scratchTablePrefix names the table the write check creates and drops.
const scratchTablePrefix = "_walshadow_preflight_"

// staleScratchAge is how old a scratch table must be for a check to drop
// it as left by an earlier one.
var staleScratchAge = 10 * time.Minute

// cleanupTimeout bounds dropping the scratch table after a cancelled ctx.
const cleanupTimeout = 10 * time.Second

// readTimeout bounds each query when the config leaves it to the
// connection's default (5 minutes): a preflight should fail fast.
const readTimeout = 30 * time.Second

// ClickHouse checks the server the clickhouse_ddl output writes to: it
// answers, its version and what its dialect lacks, the target database
// (database, or the DSN's when empty) exists or can be created, and the
// user can create, write and drop a table there. With a cluster, also
// ZooKeeper and every node (checkCluster).
func ClickHouse(ctx context.Context, cfg clickhouse.ConnConfig, database string) Report {
	var fs findings
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = readTimeout
	}
	conn, err := clickhouse.Open(ctx, cfg)
	if err != nil {
		// Open's errors name the hosts and user, never the password.
		fs.fail("clickhouse", fmt.Sprintf("%v; skipped clickhouse_version, clickhouse_database, clickhouse_write", err),
			"check the output's dsn (hosts, native port: 9000, or 9440 with secure=true; user, password) and tls, and that the server runs")
		return fs.r
	}
	defer conn.Close()
	fs.info("clickhouse_version", describeDialect(conn.Dialect()))
	if database == "" {
		database = conn.Database()
	}
	if topo := conn.Topology(); topo.Cluster != "" {
		fs.info("clickhouse_cluster", topo.String())
		if skip := fs.checkCluster(ctx, conn, cfg, database); skip != "" {
			fs.warn("clickhouse_write", "skipped clickhouse_database and clickhouse_write: "+skip,
				"run walshadow preflight again once every node and ZooKeeper answer")
			return fs.r
		}
	}
	if fs.checkCHDatabase(ctx, conn, database) {
		fs.checkCHWrite(ctx, conn, database)
	}
	return fs.r
}

// describeDialect names the version and every capability it lacks with
// what walshadow does instead.
func describeDialect(d clickhouse.Dialect) string {
	var lacks []string
	add := func(has bool, what string) {
		if !has {
			lacks = append(lacks, what)
		}
	}
	add(d.RenameColumn, "no RENAME COLUMN (renamed columns keep their old ClickHouse name)")
	add(d.DateTime64, "no DateTime64 (timestamps as Int64 µs since 1970, commit time as _commit_ts_us)")
	add(d.Date32, "no Date32 (dates as Int32 days since 1970)")
	add(d.Bool, "no Bool (booleans as UInt8 0/1)")
	add(d.Decimal256, "no Decimal256 (numeric above precision 38 as String)")
	add(d.IfNotExistsColumns, "no ADD/DROP COLUMN IF [NOT] EXISTS")
	add(d.IsDeletedEngineArg, "no is_deleted engine argument (ReplacingMergeTree(_lsn))")
	if d.Date32 || d.DateTime64 {
		add(d.WideDateRange, "Date32/DateTime64 cover 1925..2283 only (values outside are refused)")
	}
	head := "ClickHouse " + d.Version.String()
	switch {
	case len(lacks) == 0:
		return head + ": every capability walshadow uses"
	case !d.RenameColumn && !d.DateTime64 && !d.Date32 && !d.Bool:
		return head + ": legacy dialect — " + strings.Join(lacks, ", ")
	}
	return head + ": " + strings.Join(lacks, ", ")
}

// checkCHDatabase reports whether database exists, creating it when it
// does not (the output creates it at start anyway).
func (fs *findings) checkCHDatabase(ctx context.Context, conn *clickhouse.Conn, database string) bool {
	var n uint64
	if err := conn.Native().QueryRow(ctx, "SELECT count() FROM system.databases WHERE name = "+clickhouse.QuoteString(database)).Scan(&n); err != nil {
		fs.fail("clickhouse_database", fmt.Sprintf("looking up database %s in system.databases: %v; skipped clickhouse_write", clickhouse.QuoteIdent(database), err), "")
		return false
	}
	if n > 0 {
		fs.info("clickhouse_database", fmt.Sprintf("database %s exists", clickhouse.QuoteIdent(database)))
		return true
	}
	create, err := clickhouse.CreateDatabase(database)
	if err == nil {
		err = conn.Exec(ctx, create)
	}
	if err != nil {
		fs.fail("clickhouse_database", fmt.Sprintf("database %s does not exist and cannot be created: %v; skipped clickhouse_write", clickhouse.QuoteIdent(database), err),
			fmt.Sprintf("create it (CREATE DATABASE %s) as a user who may, or point the output's database at an existing one", clickhouse.QuoteIdent(database)))
		return false
	}
	fs.info("clickhouse_database", fmt.Sprintf("database %s did not exist; preflight created it, as the output would", clickhouse.QuoteIdent(database)))
	return true
}

// checkCHWrite creates a scratch table of the engine walshadow uses,
// inserts a row and drops it.
func (fs *findings) checkCHWrite(ctx context.Context, conn *clickhouse.Conn, database string) {
	fs.dropStaleScratch(ctx, conn, database)
	var suffix [6]byte
	rand.Read(suffix[:])
	target := clickhouse.Target{Database: database, Table: scratchTablePrefix + hex.EncodeToString(suffix[:])}
	table := clickhouse.QuoteQualified(target)
	remedy := fmt.Sprintf("let the output's user create, insert into and drop tables in %s (not readonly; allow_databases in users.xml, or GRANT CREATE TABLE, INSERT, DROP TABLE ON %s.* on servers with SQL access control)",
		clickhouse.QuoteIdent(database), clickhouse.QuoteIdent(database))
	create, err := clickhouse.CreateTable(conn.Dialect(), target, []clickhouse.ColumnSpec{{Name: "x", Type: clickhouse.ColumnType{Type: "UInt8", Repr: clickhouse.ReprInt}}}, []string{"x"}, clickhouse.TableOptions{})
	if err == nil {
		err = conn.Exec(ctx, create)
	}
	if err != nil {
		fs.fail("clickhouse_write", fmt.Sprintf("cannot create a table in database %s: %v", clickhouse.QuoteIdent(database), err), remedy)
		return
	}
	insertErr := insertScratchRow(ctx, conn, table)
	dropCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	dropErr := conn.Exec(dropCtx, "DROP TABLE "+table)
	switch {
	case insertErr != nil:
		fs.fail("clickhouse_write", fmt.Sprintf("created %s but cannot insert into it: %v", table, insertErr), remedy)
	case dropErr != nil:
		fs.fail("clickhouse_write", fmt.Sprintf("created and wrote %s but cannot drop it: %v", table, dropErr),
			fmt.Sprintf("drop %s by hand; %s", table, remedy))
	default:
		fs.info("clickhouse_write", fmt.Sprintf("created, wrote and dropped a scratch table in database %s", clickhouse.QuoteIdent(database)))
	}
	if insertErr != nil && dropErr != nil {
		fs.warn("clickhouse_write", fmt.Sprintf("could not drop the scratch table %s: %v", table, dropErr), "drop it by hand")
	}
}

// dropStaleScratch drops the scratch tables of earlier checks that did not
// finish (killed between CREATE and DROP): on shards also a local table
// whose Distributed table was never made. Only those older than
// staleScratchAge: another pipeline's check may be under way.
func (fs *findings) dropStaleScratch(ctx context.Context, conn *clickhouse.Conn, database string) {
	rows, err := conn.Native().Query(ctx, "SELECT DISTINCT name FROM system.tables WHERE database IN ("+clickhouse.QuoteString(database)+", "+
		clickhouse.QuoteString(database+clickhouse.LocalSuffix)+") AND startsWith(name, "+clickhouse.QuoteString(scratchTablePrefix)+
		") AND metadata_modification_time < now() - "+strconv.Itoa(int(staleScratchAge.Seconds())))
	if err != nil {
		return // the write check that follows says what is wrong
	}
	var stale []string
	for rows.Next() {
		var name string
		if rows.Scan(&name) == nil {
			stale = append(stale, name)
		}
	}
	rows.Close()
	for _, name := range stale {
		t := clickhouse.Target{Database: database, Table: name}
		if err := conn.Exec(ctx, clickhouse.DropTable(t)); err != nil {
			fs.warn("clickhouse_write", fmt.Sprintf("could not drop %s, left by an earlier check: %v", clickhouse.QuoteQualified(t), err), "drop it by hand")
			continue
		}
		fs.info("clickhouse_write", fmt.Sprintf("dropped %s, left by an earlier check that did not finish", clickhouse.QuoteQualified(t)))
	}
}

// insertScratchRow inserts one row the way the output does, as a native
// block (18.16 waits for data blocks after INSERT ... VALUES over the
// native protocol).
func insertScratchRow(ctx context.Context, conn *clickhouse.Conn, table string) error {
	batch, err := conn.Native().PrepareBatch(ctx, "INSERT INTO "+table+" (`x`, `_lsn`)")
	if err != nil {
		return err
	}
	defer batch.Close()
	if err := batch.Append(uint8(1), uint64(1)); err != nil {
		batch.Abort()
		return err
	}
	return batch.Send()
}
