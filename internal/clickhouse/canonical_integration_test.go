package clickhouse

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/rowmodel"
	"github.com/walshadow/walshadow/internal/testrig"
)

// TestCanonicalTextMatchesPostgres checks the hand-written texts against
// the real server's output under rowmodel.CompareSettings.
func TestCanonicalTextMatchesPostgres(t *testing.T) {
	pg := testrig.StartPostgres(t)
	conn := pg.Connect(t)
	ctx := context.Background()
	for _, s := range rowmodel.CompareSettings {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	checked := 0
	for _, c := range canonicalCases() {
		if c.pg == "" {
			continue
		}
		// The text result format is the output function's text; a ::text
		// cast is not always that (bool prints "true").
		rows, err := conn.Query(ctx, "SELECT "+c.pg, pgx.QueryResultFormats{pgx.TextFormatCode})
		if err != nil {
			t.Fatalf("%s: SELECT %s: %v", c.name, c.pg, err)
		}
		var got string
		for rows.Next() {
			got = string(rows.RawValues()[0])
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Errorf("%s: SELECT %s: %v", c.name, c.pg, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s: PostgreSQL prints %s as %q; the case expects %q", c.name, c.pg, got, c.want)
		}
		checked++
	}
	if checked < 40 {
		t.Fatalf("only %d cases checked against PostgreSQL", checked)
	}
}
