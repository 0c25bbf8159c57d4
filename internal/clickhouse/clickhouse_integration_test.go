package clickhouse

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/testrig"
)

// TestLegacyDDLOnClickHouse runs the Legacy1816 rendering against the real
// server and checks system.columns holds what the rendering promised.
func TestLegacyDDLOnClickHouse(t *testing.T) {
	ch := testrig.StartClickHouse(t)
	version := ch.HTTPQuery(t, "SELECT version()")
	d, err := ParseDialect(version)
	if err != nil {
		t.Fatal(err)
	}
	if d != Legacy1816 {
		t.Fatalf("server reports %s = %+v; the test pins Legacy1816 = %+v", version, d, Legacy1816)
	}
	exec := func(sql string, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		ch.HTTPQuery(t, sql)
	}
	// columns returns "name type default_expression" lines of a table.
	columns := func(target Target) []string {
		t.Helper()
		out := ch.HTTPQuery(t, fmt.Sprintf("SELECT name, type FROM system.columns WHERE database = %s AND table = %s FORMAT TSVRaw",
			QuoteString(target.Database), QuoteString(target.Table)))
		if out == "" {
			return nil
		}
		return strings.Split(out, "\n")
	}
	promised := func(specs []ColumnSpec) []string {
		var lines []string
		for _, c := range append(append([]ColumnSpec(nil), Physical(specs)...), SyntheticColumns(d)...) {
			lines = append(lines, c.Name+"\t"+c.TypeSQL())
		}
		return lines
	}
	assertColumns := func(target Target, want []string) {
		t.Helper()
		if got := columns(target); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("system.columns of %s:\n%s\nwant:\n%s", QuoteQualified(target), strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}

	const db = "walshadow.test`db"
	exec(CreateDatabase(db))
	exec(CreateDatabase(db)) // IF NOT EXISTS: a replay succeeds

	every := DefaultTarget(db, "public", "every_type")
	specs := specsFor(t, d, "public.every_type", everyTypeColumns(), "id")
	exec(CreateTable(d, every, specs, []string{"id"}, TableOptions{Settings: []Setting{{"index_granularity", "8192"}}}))
	exec(CreateTable(d, every, specs, []string{"id"}, TableOptions{}))
	want := promised(specs)
	assertColumns(every, want)

	weird := DefaultTarget(db, "we`ird\\schema", "t.a%ble")
	weirdSpecs := specsFor(t, d, "weird", []desclog.Column{
		{Name: "k`1", TypeOid: oidInt4, TypeKind: 'b', NotNull: true},
		{Name: "k.2", TypeOid: oidText, TypeKind: 'b', NotNull: true},
		{Name: "créé", TypeOid: oidDate, TypeKind: 'b', NotNull: true},
	}, "k`1", "k.2")
	exec(CreateTable(d, weird, weirdSpecs, []string{"k`1", "k.2"}, TableOptions{PartitionBy: "intDiv(`créé`, 30)"}))
	assertColumns(weird, promised(weirdSpecs))
	keyless := DefaultTarget(db, "public", "events")
	keylessSpecs := specsFor(t, d, "public.events", everyTypeColumns()[:3])
	exec(CreateTable(d, keyless, keylessSpecs, nil, TableOptions{}))
	assertColumns(keyless, append(promised(keylessSpecs), ColSeq+"\tUInt32"))

	// ADD COLUMN with DEFAULTs, then a row without them reads the defaults.
	added := []desclog.Column{
		{Name: "price", TypeOid: oidNumeric, TypMod: NumericTypmod(12, 3), TypeKind: 'b', HasMissing: true, Missing: ptr("-1.250")},
		{Name: "note", TypeOid: oidText, TypeKind: 'b', HasMissing: true, Missing: ptr("it's \\ new")},
		{Name: "seen_at", TypeOid: oidTimestamptz, TypeKind: 'b', NotNull: true, HasMissing: true, Missing: ptr("2024-01-02 03:04:05.123456+00")},
		{Name: "flag", TypeOid: oidBool, TypeKind: 'b', NotNull: true, HasMissing: true, Missing: ptr("t")},
		{Name: "born", TypeOid: oidDate, TypeKind: 'b', HasMissing: true, Missing: ptr("2001-02-03")},
		{Name: "blob", TypeOid: oidBytea, TypeKind: 'b', HasMissing: true, Missing: ptr(`\x00270a5c`)},
		{Name: "ratio", TypeOid: oidFloat4, TypeKind: 'b', HasMissing: true, Missing: ptr("3.1415927")},
		{Name: "big", TypeOid: oidInt8, TypeKind: 'b', HasMissing: true, Missing: ptr("-9223372036854775808")},
		{Name: "uid", TypeOid: oidUUID, TypeKind: 'b', HasMissing: true, Missing: ptr("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")},
		{Name: "nothing", TypeOid: oidInt4, TypeKind: 'b', HasMissing: true},
		// ClickHouse's float parsing reads this one as ...357e-104: the
		// default must carry the exact bits.
		{Name: "tiny", TypeOid: oidFloat8, TypeKind: 'b', HasMissing: true, Missing: ptr("2.7626714238267354e-104")},
	}
	for _, c := range added {
		spec, err := ColumnSpecFor(d, "public.every_type", c, false)
		if err != nil {
			t.Fatal(err)
		}
		sql, mustCheck, err := AddColumn(d, every, spec)
		if !mustCheck {
			t.Errorf("AddColumn on 18.16 does not ask for the system.columns check")
		}
		exec(sql, err)
		want = append(want, spec.Name+"\t"+spec.TypeSQL())
	}
	// Added columns go last in system.columns, after the synthetic ones.
	assertColumns(every, want)
	ch.HTTPQuery(t, "INSERT INTO "+QuoteQualified(every)+" (`id`, `c_timestamp_with_time_zone`, `_lsn`) VALUES (1, 0, 1)")
	got := ch.HTTPQuery(t, "SELECT toString(price), note, seen_at, flag, born, hex(blob), toString(ratio), big, toString(uid), isNull(nothing), hex(reinterpretAsString(tiny)) FROM "+
		QuoteQualified(every)+" FORMAT TSVRaw")
	var tinyLE [8]byte
	binary.LittleEndian.PutUint64(tinyLE[:], math.Float64bits(2.7626714238267354e-104))
	tinyBits := strings.ToUpper(hex.EncodeToString(tinyLE[:]))
	wantRow := strings.Join([]string{"-1.250", `it's \ new`, "1704164645123456", "1", "11356", "00270A5C", "3.1415927",
		"-9223372036854775808", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "1", tinyBits}, "\t")
	if got != wantRow {
		t.Errorf("defaults read back as\n%q\nwant\n%q", got, wantRow)
	}

	sql, mustCheck, err := DropColumn(d, every, "c_money")
	if !mustCheck {
		t.Errorf("DropColumn on 18.16 does not ask for the system.columns check")
	}
	exec(sql, err)
	var afterDrop []string
	for _, line := range want {
		if !strings.HasPrefix(line, "c_money\t") {
			afterDrop = append(afterDrop, line)
		}
	}
	assertColumns(every, afterDrop)

	if _, err := RenameColumn(d, every, "c_text", "c_text2"); err == nil {
		t.Error("RenameColumn rendered SQL for 18.16")
	}

	exec(TruncateTable(every), nil)
	if n := ch.HTTPQuery(t, "SELECT count() FROM "+QuoteQualified(every)); n != "0" {
		t.Errorf("after TRUNCATE: %s rows", n)
	}
	exec(DropTable(every), nil)
	exec(DropTable(every), nil) // IF EXISTS: a replay succeeds
	if cols := columns(every); cols != nil {
		t.Errorf("after DROP TABLE: columns %v", cols)
	}
	if n := ch.HTTPQuery(t, "SELECT count() FROM system.tables WHERE database = "+QuoteString(db)); n != "2" {
		t.Errorf("tables left in %s: %s, want the weird and keyless ones", db, n)
	}
}
