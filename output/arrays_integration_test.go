package output_test

import (
	"strings"
	"testing"
	"time"
)

// TestNullableArrays: a nullable array column is Array(Nullable(T)) with a
// NULL flag column beside it, so NULL and '{}' stay apart through the
// initial load, streamed changes, an update that leaves a TOASTed array
// unchanged (read back from ClickHouse), ADD COLUMN with and without a
// default, and DROP NOT NULL (the flag is added, no reload). Every table
// ends equal to the source.
func TestNullableArrays(t *testing.T) {
	r := newRig(t)
	r.src.Exec(t, `CREATE TABLE arr_keyed (id int PRIMARY KEY, tags text[], nums int4[] NOT NULL, note text);
		INSERT INTO arr_keyed VALUES (1, NULL, '{}', 'a'), (2, '{}', '{1}', 'b'), (3, '{x,NULL}', '{NULL}', 'c'), (4, '{NULL}', '{2,3}', 'd');
		CREATE TABLE arr_keyless (tags text[], n int);
		INSERT INTO arr_keyless VALUES (NULL, 1), ('{}', 2), (NULL, 3), ('{""}', 4)`)
	logs := &logLines{}
	run := r.startLogged(t, "", logs)
	r.waitLoadsDone(t, run, logs, 2, 2*time.Minute)

	r.src.Exec(t, `INSERT INTO arr_keyed VALUES (5, NULL, '{}', 'e'), (6, '{}', '{}', 'f');
		INSERT INTO arr_keyed SELECT 7, array(SELECT md5(g::text) FROM generate_series(1, 400) g), '{7}', 'big';
		UPDATE arr_keyed SET tags = NULL WHERE id = 3;
		UPDATE arr_keyed SET tags = '{}' WHERE id = 1;
		UPDATE arr_keyed SET note = 'unchanged toast' WHERE id = 7;
		DELETE FROM arr_keyed WHERE id = 4;
		INSERT INTO arr_keyless VALUES (NULL, 5), ('{}', 6);
		UPDATE arr_keyless SET tags = NULL WHERE n = 2;
		DELETE FROM arr_keyless WHERE n = 3`)
	r.src.Exec(t, `ALTER TABLE arr_keyed ALTER COLUMN nums DROP NOT NULL;
		INSERT INTO arr_keyed VALUES (8, '{y}', NULL, 'h');
		ALTER TABLE arr_keyed ADD COLUMN later int8[], ADD COLUMN preset int4[] DEFAULT '{9}';
		INSERT INTO arr_keyed VALUES (9, NULL, NULL, 'i', '{1}', NULL), (10, '{}', '{}', 'j', '{}', '{}')`)
	r.src.Exec(t, "CREATE TABLE arr_marker (id int PRIMARY KEY); INSERT INTO arr_marker VALUES (1)")
	r.waitCH(t, run, liveCountSQL("public", "arr_marker"), "1", ddlWait)
	run.stop(t)
	r.compareAll(t)
	for _, q := range []struct{ sql, want string }{
		// NULL and '{}' apart, on every path that wrote them.
		{"SELECT groupArray((id, tags__is_null)) FROM (SELECT id, tags__is_null FROM walshadow_test.`public.arr_keyed` FINAL WHERE _is_deleted = 0 ORDER BY id)",
			"[(1,0),(2,0),(3,1),(5,1),(6,0),(7,0),(8,0),(9,1),(10,0)]"},
		{"SELECT groupArray((id, nums__is_null, later__is_null, preset__is_null)) FROM (SELECT * FROM walshadow_test.`public.arr_keyed` FINAL WHERE _is_deleted = 0 ORDER BY id)",
			"[(1,0,1,0),(2,0,1,0),(3,0,1,0),(5,0,1,0),(6,0,1,0),(7,0,1,0),(8,1,1,0),(9,1,0,1),(10,0,0,0)]"},
		{"SELECT length(tags) FROM walshadow_test.`public.arr_keyed` FINAL WHERE id = 7", "400"},
		{"SELECT type FROM system.columns WHERE database = 'walshadow_test' AND table = 'public.arr_keyed' AND name = 'tags'", "Array(Nullable(String))"},
	} {
		if got := r.ch.HTTPQuery(t, q.sql); got != q.want {
			t.Errorf("%s\n  = %s, want %s", q.sql, got, q.want)
		}
	}
	for _, reload := range []string{"arr_keyed is repaired", "arr_keyed changed at"} {
		if strings.Contains(logs.String(), reload) {
			t.Errorf("%q in the log: DROP NOT NULL of an array reloaded the table", reload)
		}
	}
	if t.Failed() {
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "arr_keyed") {
				t.Log(l)
			}
		}
	}
}
