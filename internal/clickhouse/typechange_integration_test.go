package clickhouse

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/testrig"
)

// float4As8 is PostgreSQL's float8 text of float4 value text (the cast is
// the exact binary widening).
func float4As8(text string) string {
	f, err := strconv.ParseFloat(text, 32)
	if err != nil {
		panic(err)
	}
	return strconv.FormatFloat(float64(float32(f)), 'g', -1, 64)
}

// modifyValues are, per MODIFY case of typeChangeCases, source values in
// the old type's text and PostgreSQL's text of their cast to the new type
// (nil: NULL).
func modifyValues() map[string][][2]*string {
	s := func(old, new string) [2]*string { return [2]*string{&old, &new} }
	same := func(v string) [2]*string { return s(v, v) }
	null := [2]*string{}
	ints := func(limits ...string) [][2]*string {
		rows := [][2]*string{same("0"), same("-1"), same("1"), null}
		for _, l := range limits {
			rows = append(rows, same(l))
		}
		return rows
	}
	float4 := [][2]*string{null}
	for _, v := range []string{"0", "-0", "1.1", "-3.4028235e+38", "3.4028235e+38", "1e-45", "1.17549435e-38", "0.1", "16777216"} {
		float4 = append(float4, s(v, float4As8(v)))
	}
	float4 = append(float4, same("NaN"), same("Infinity"), same("-Infinity"))
	return map[string][][2]*string{
		"int2 to int4":             ints("-32768", "32767"),
		"int2 to int8":             ints("-32768", "32767"),
		"int4 to int8":             ints("-2147483648", "2147483647"),
		"oid to int8":              {same("0"), same("4294967295"), same("2147483648"), null},
		"float4 to float8":         float4,
		"int2 to float4":           ints("-32768", "32767"),
		"int2 to float8":           ints("-32768", "32767"),
		"int4 to float8":           ints("-2147483648", "2147483647", "16777217"),
		"int4 to domain over int8": ints("-2147483648", "2147483647"),
		"numeric(10,2) to numeric(12,4) (Decimal widening)": {
			s("0.00", "0.0000"), s("-99999999.99", "-99999999.9900"), s("99999999.99", "99999999.9900"), s("0.01", "0.0100"), s("-0.5", "-0.5000"), null},
		"numeric(10,2) to numeric(12,2)":         {same("-99999999.99"), same("99999999.99"), same("0.01"), null},
		"numeric(10,2) to numeric(11,3)":         {s("-99999999.99", "-99999999.990"), s("0.01", "0.010"), null},
		"int4 to numeric(12,2)":                  {s("-2147483648", "-2147483648.00"), s("2147483647", "2147483647.00"), s("0", "0.00"), null},
		"int8 to numeric(19,0)":                  {same("-9223372036854775808"), same("9223372036854775807"), same("0"), null},
		"DROP NOT NULL int4":                     {same("-2147483648"), same("2147483647"), same("0")},
		"DROP NOT NULL text":                     {same(""), same("it's \\ \x01 ünïcode"), same("x")},
		"DROP NOT NULL with int4 to int8":        {same("-2147483648"), same("2147483647")},
		"DROP NOT NULL with varchar(10) to text": {same(""), same("0123456789"), same("  padded  ")},
	}
}

// TestTypeChangeModifyOnClickHouse checks on the real 18.16 server that
// every MODIFY COLUMN Reconcile plans converts values to exactly what the
// output writes for the new type: a table of the old shape holding the old
// values, modified, must read back as a table created for the new shape
// holding the cast values. A column's DEFAULT must survive the change.
func TestTypeChangeModifyOnClickHouse(t *testing.T) {
	server := testrig.StartClickHouse(t)
	d := Legacy1816
	const db = "walshadow_typechange"
	ctx := context.Background()
	describe := func(target Target) CHTable {
		t.Helper()
		out := server.HTTPQuery(t, "SELECT name, type FROM system.columns WHERE database = "+QuoteString(target.Database)+
			" AND table = "+QuoteString(target.Table)+" FORMAT TSVRaw")
		table := CHTable{}
		for _, line := range strings.Split(out, "\n") {
			if name, typ, ok := strings.Cut(line, "\t"); ok {
				table.Exists = true
				table.Columns = append(table.Columns, CHColumn{Name: name, Type: typ})
			}
		}
		return table
	}
	run := func(stmts []string) error {
		for _, sql := range stmts {
			if _, err := server.Query(ctx, sql); err != nil {
				return err
			}
		}
		return nil
	}
	// create makes the table for shape under cfg and returns its agreement.
	create := func(cfg TableConfig, shape *desclog.Descriptor) (*Agreed, error) {
		p, err := Reconcile(d, db, cfg, nil, describe(ConfiguredTarget(db, cfg, shape.Namespace, shape.Name)), shape)
		if err != nil {
			return nil, err
		}
		return p.Agreed, run(p.Statements)
	}
	spec := func(a *Agreed) ColumnSpec {
		for _, m := range a.Columns {
			if m.Attnum == 2 {
				return m.Spec
			}
		}
		t.Fatalf("no column v in %+v", a.Columns)
		return ColumnSpec{}
	}
	insert := func(target Target, v ColumnSpec, id int, text *string) error {
		lit := "CAST(NULL AS " + v.TypeSQL() + ")"
		if text != nil {
			var err error
			if lit, err = DefaultLiteral(d, v.Type, *text); err != nil {
				return err
			}
		}
		_, err := server.Query(ctx, fmt.Sprintf("INSERT INTO %s (`id`, `v`, `_lsn`) SELECT %d, %s, 1", QuoteQualified(target), id, lit))
		return err
	}
	// read renders v of every row exactly: floats by their bits.
	read := func(target Target, v ColumnSpec) (string, error) {
		expr := "toString(assumeNotNull(`v`))"
		if v.Type.Repr == ReprFloat {
			expr = "hex(reinterpretAsString(assumeNotNull(`v`)))"
		}
		if v.Nullable {
			expr = "if(isNull(`v`), 'NULL', " + expr + ")"
		}
		return server.Query(ctx, "SELECT `id`, toTypeName(`v`), "+expr+" FROM "+QuoteQualified(target)+" ORDER BY `id` FORMAT TSVRaw")
	}

	server.HTTPQuery(t, "CREATE DATABASE IF NOT EXISTS "+QuoteIdent(db))
	values := modifyValues()
	tested := 0
	for i, tc := range typeChangeCases() {
		before, after := typeChangeShapes(tc)
		cfg := TableConfig{Table: fmt.Sprintf("case_%d", i)}
		prev, err := Reconcile(d, db, cfg, nil, CHTable{}, before)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Reconcile(d, db, cfg, prev.Agreed, chAfter(d, prev.Agreed), after)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Reload) > 0 || !slices.ContainsFunc(p.Statements, func(s string) bool { return strings.Contains(s, " MODIFY COLUMN ") }) {
			// Keep and reload cases run no statement; a NULL flag added
			// (DROP NOT NULL of an array) converts no value.
			continue
		}
		rows, ok := values[tc.name]
		if !ok {
			t.Errorf("%s: MODIFY case without values to check", tc.name)
			continue
		}
		tested++
		t.Run(tc.name, func(t *testing.T) {
			old, err := create(cfg, before)
			if err != nil {
				t.Fatal(err)
			}
			for id, row := range rows {
				if err := insert(old.Target, spec(old), id, row[0]); err != nil {
					t.Fatalf("inserting %v: %v", row[0], err)
				}
			}
			p, err := Reconcile(d, db, cfg, old, describe(old.Target), after)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Statements) != 1 || !strings.Contains(p.Statements[0], " MODIFY COLUMN ") {
				t.Fatalf("planned %q", p.Statements)
			}
			if err := run(p.Statements); err != nil {
				t.Fatalf("18.16 refused the MODIFY: %v", err)
			}
			if got, want := describe(old.Target), chAfter(d, p.Agreed); !tableHasColumn(got, "v", spec(p.Agreed).TypeSQL()) {
				t.Errorf("after MODIFY ClickHouse holds %+v, the agreement %+v", got.Columns, want.Columns)
			}
			refCfg := TableConfig{Table: cfg.Table + "_ref"}
			ref, err := create(refCfg, after)
			if err != nil {
				t.Fatal(err)
			}
			if spec(ref).TypeSQL() != spec(p.Agreed).TypeSQL() {
				t.Fatalf("a first sight maps %s, the MODIFY made %s", spec(ref).TypeSQL(), spec(p.Agreed).TypeSQL())
			}
			for id, row := range rows {
				if err := insert(ref.Target, spec(ref), id, row[1]); err != nil {
					t.Fatalf("inserting %v: %v", row[1], err)
				}
			}
			got, err := read(old.Target, spec(p.Agreed))
			if err != nil {
				t.Fatal(err)
			}
			want, err := read(ref.Target, spec(ref))
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("the modified column reads\n%s\nthe output would have written\n%s", got, want)
			}
			// Reconciled again: nothing left to do.
			again, err := Reconcile(d, db, cfg, p.Agreed, describe(old.Target), after)
			if err != nil || len(again.Statements) != 0 || len(again.Refused) != 0 {
				t.Errorf("second reconcile: %q, refused %v, %v", again.Statements, again.Refused, err)
			}
		})
	}
	if tested == 0 {
		t.Fatal("no MODIFY case ran")
	}

	// A DEFAULT (the column was added with one) survives the change: a row
	// of a part written before the ADD, and a row inserted without the
	// column after the MODIFY, read the converted default.
	for _, tc := range []struct {
		name               string
		before, after      desclog.Column
		missing, converted string
	}{
		{"int4 to int8", pgInteger, pgBigint, "7", "7"},
		{"float4 to float8", pgReal, pgDouble, "1.1", float4As8("1.1")},
		{"numeric(10,2) to numeric(12,4)", pgNumericPS(10, 2), pgNumericPS(12, 4), "-1.25", "-1.2500"},
	} {
		t.Run("default "+tc.name, func(t *testing.T) {
			cfg := TableConfig{Table: "default_" + strings.ReplaceAll(tc.name, " ", "_")}
			start := rel([]int16{1}, intCol(1, "id", true))
			a, err := create(cfg, start)
			if err != nil {
				t.Fatal(err)
			}
			server.HTTPQuery(t, "INSERT INTO "+QuoteQualified(a.Target)+" (`id`, `_lsn`) VALUES (1, 1)")
			withDefault := tc.before
			withDefault.HasMissing, withDefault.Missing = true, &tc.missing
			added := rel([]int16{1}, intCol(1, "id", true), withDefault)
			p, err := Reconcile(d, db, cfg, a, describe(a.Target), added)
			if err != nil {
				t.Fatal(err)
			}
			if err := run(p.Statements); err != nil {
				t.Fatal(err)
			}
			p, err = Reconcile(d, db, cfg, p.Agreed, describe(a.Target), rel([]int16{1}, intCol(1, "id", true), tc.after))
			if err != nil {
				t.Fatal(err)
			}
			if err := run(p.Statements); err != nil {
				t.Fatalf("18.16 refused %q: %v", p.Statements, err)
			}
			server.HTTPQuery(t, "INSERT INTO "+QuoteQualified(a.Target)+" (`id`, `_lsn`) VALUES (2, 2)")
			got, err := read(a.Target, spec(p.Agreed))
			if err != nil {
				t.Fatal(err)
			}
			lit, err := DefaultLiteral(d, spec(p.Agreed).Type, tc.converted)
			if err != nil {
				t.Fatal(err)
			}
			expr := "toString(" + lit + ")"
			if spec(p.Agreed).Type.Repr == ReprFloat {
				expr = "hex(reinterpretAsString(" + lit + "))"
			}
			value := server.HTTPQuery(t, "SELECT "+expr)
			want := fmt.Sprintf("1\t%s\t%s\n2\t%s\t%s", spec(p.Agreed).TypeSQL(), value, spec(p.Agreed).TypeSQL(), value)
			if got != want {
				t.Errorf("after MODIFY the defaults read\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func tableHasColumn(t CHTable, name, typ string) bool {
	c, ok := t.Column(name)
	return ok && normalizeType(c.Type) == normalizeType(typ)
}
