package testrig

import (
	"math/rand"
	"strings"
	"testing"
)

func TestRandomLoad(t *testing.T) {
	p := StartPostgres(t, WithMaxPreparedTransactions(10), WithSetting("log_min_error_statement", "panic"))
	opt := RandomLoadOptions{Seed: 42, Tables: 12, Ops: 800, Clients: 3, DDL: true, TwoPhase: true}
	tables := p.CreateRandomSchema(t, opt)
	if len(tables) != 12 {
		t.Fatalf("%d tables, want 12", len(tables))
	}
	stats := p.RunRandomLoad(t, opt)
	t.Logf("random load: %v", stats)

	for _, op := range []string{"insert", "copy", "update", "update_key", "delete", "tx_savepoint", "two_phase_commit", "ddl_add_column_default"} {
		if stats.Ops[op] == 0 {
			t.Errorf("no %s operation ran", op)
		}
	}
	if stats.Committed < opt.Ops/2 {
		t.Errorf("only %d committed transactions of %d operations", stats.Committed, opt.Ops)
	}
	if n := p.QueryInt(t, "SELECT count(*) FROM pg_prepared_xacts"); n != 0 {
		t.Errorf("%d prepared transactions left behind", n)
	}
	// The tables got rows (a TRUNCATE may just have emptied one), some of
	// them TOASTed.
	empty := 0
	for _, name := range tables {
		if n := p.QueryInt(t, "SELECT count(*) FROM "+name); n == 0 {
			empty++
		}
	}
	if empty > 3 {
		t.Errorf("%d of %d tables are empty", empty, len(tables))
	}
	// (DDL may have renamed the big columns: look at the TOAST tables.)
	if n := p.QueryInt(t, "SELECT COALESCE(sum(pg_relation_size(reltoastrelid)), 0) FROM pg_class WHERE relname LIKE 'rl\\_%' AND reltoastrelid <> 0"); n == 0 {
		t.Error("no table has a TOASTed value")
	}
	// The types the contract names are all there.
	types := p.QueryString(t, `SELECT string_agg(DISTINCT format_type(atttypid, atttypmod), ',')
		FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
		WHERE c.relname LIKE 'rl\_%' AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped`)
	for _, want := range []string{"boolean", `"char"`, "name", "smallint", "integer", "bigint", "oid", "real", "double precision",
		"numeric", "numeric(10,2)", "text", "character varying(40)", "character(8)", "bytea", "json", "uuid", "date",
		"time without time zone", "time with time zone", "timestamp without time zone", "timestamp with time zone",
		"interval", "inet", "cidr", "macaddr", "money", "jsonb", "integer[]", "text[]", "rl_mood", "int4range",
		"tstzrange", "rl_dtext", "rl_dint", "tsvector", "rl_pair"} {
		if !strings.Contains(","+types+",", ","+want+",") {
			t.Errorf("no column of type %s (have %s)", want, types)
		}
	}
}

func TestRandomValuesAreValidInput(t *testing.T) {
	// Every generator's output is accepted by its type's input function.
	p := StartPostgres(t)
	p.Exec(t, randomTypesSQL)
	conn := p.Connect(t)
	r := rand.New(rand.NewSource(1))
	for _, tb := range baseTables() {
		for _, col := range tb.cols {
			for i := 0; i < 200; i++ {
				text, null := col.gen(r)
				sql := "SELECT " + sqlLiteral(text, null, col.sqlType) + "::text"
				if _, err := conn.Exec(t.Context(), sql); err != nil {
					t.Fatalf("%s.%s: %v\n%s", tb.name, col.name, err, abbreviate(sql))
				}
			}
		}
	}
}

func TestRandomLoadKeylessTypesTemp(t *testing.T) {
	p := StartPostgres(t, WithMaxPreparedTransactions(10), WithSetting("log_min_error_statement", "panic"))
	opt := RandomLoadOptions{Seed: 43, Tables: 11, Ops: 1200, Clients: 3, DDL: true, TwoPhase: true,
		Keyless: true, TypeChanges: true, TempTables: true}
	tables := p.CreateRandomSchema(t, opt)
	if len(tables) != 13 {
		t.Fatalf("%d tables, want 13 (the 11 built-in ones and the 2 keyless ones)", len(tables))
	}
	stats := p.RunRandomLoad(t, opt)
	t.Logf("random load: %v", stats)
	for _, op := range []string{"update_delete_tx", "update_then_delete", "insert_duplicate", "truncate_keyless",
		"vacuum_full", "cluster", "temp_table", "ddl_alter_type_exact", "ddl_alter_type_reload"} {
		if stats.Ops[op] == 0 {
			t.Errorf("no %s operation ran", op)
		}
	}
	if n := p.QueryInt(t, "SELECT count(*) FROM pg_class WHERE relname IN ('rl_nokey', 'rl_nothing', 'rl_full') AND relreplident = ANY('{d,n,f}')"); n != 3 {
		t.Errorf("%d of the 3 keyless tables have their replica identity", n)
	}
	// Some keyless table holds identical rows.
	dups := int64(0)
	for _, name := range []string{"rl_nokey", "rl_nothing", "rl_full"} {
		dups += p.QueryInt(t, "SELECT count(*) FROM (SELECT t FROM "+name+" t GROUP BY t HAVING count(*) > 1) d")
	}
	if dups == 0 {
		t.Error("no keyless table holds a duplicate row")
	}
	// Type changes happened. (Which types they leave depends on how the
	// clients interleave: a later change or a dropped column can hide
	// them, so the catalog is not the evidence; the commits are.)
	if stats.TypeChanges == 0 {
		t.Error("no ALTER COLUMN ... TYPE committed")
	}
}
