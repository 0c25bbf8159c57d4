package decode

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/shadow"
	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// TestRowsGoldenServer records rowsWorkload on a real server and checks the
// decoded, replayed rows against the server's own text; with -update it
// rewrites the fixture TestRowsGoldenFixture replays.
func TestRowsGoldenServer(t *testing.T) {
	pg := testrig.StartPostgres(t)
	pg.RunSQLScript(t, rowsSchema)
	start := pg.CurrentInsertLSN(t)
	pg.RunSQLScript(t, rowsWorkload)

	ctx := context.Background()
	conn := pg.Connect(t)
	descs, err := shadow.ReadDescriptors(ctx, conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	pg.Exec(t, "TRUNCATE t_nokey")

	fx := rowsFixtureData{StartLSN: start, Descriptors: descs, Tables: map[string][][]*string{}}
	fx.DbOid = uint32(pg.QueryInt(t, "SELECT oid::int8 FROM pg_database WHERE datname = current_database()"))
	for _, set := range []string{"SET TimeZone='UTC'", "SET DateStyle='ISO, MDY'", "SET IntervalStyle='postgres'",
		"SET extra_float_digits=1", "SET bytea_output='hex'", "SET lc_monetary='C'"} {
		if _, err := conn.Exec(ctx, set); err != nil {
			t.Fatal(err)
		}
	}
	for i := range descs {
		d := &descs[i]
		if d.Kind != 'r' {
			continue
		}
		var names []string
		for _, c := range d.Columns {
			if !c.Dropped {
				names = append(names, pgx.Identifier{c.Name}.Sanitize())
			}
		}
		res, err := conn.PgConn().Exec(ctx, "SELECT "+strings.Join(names, ", ")+" FROM "+pgx.Identifier{d.Name}.Sanitize()).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		var rows [][]*string
		for _, r := range res[0].Rows {
			row := make([]*string, len(r))
			for j, v := range r {
				if v != nil {
					s := string(v)
					row[j] = &s
				}
			}
			rows = append(rows, row)
		}
		fx.Tables[d.Name] = rows
	}

	dir := t.TempDir()
	pg.CopyWALSegments(t, dir)
	r, err := wal.NewFileReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if err != nil {
			break // io.EOF or the end of the written WAL
		}
		if rec.LSN < start {
			continue
		}
		switch rec.Header.RmID {
		case wal.RmgrHeap, wal.RmgrHeap2, wal.RmgrXact:
			fx.Records = append(fx.Records, fixtureRecord{LSN: rec.LSN, Next: rec.Next, Raw: bytes.Clone(rec.Raw)})
		}
	}
	checkRowsFixture(t, &fx)
	if *update {
		writeRowsFixture(t, &fx)
	}
}
