package copybin

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/desclog"
)

var update = flag.Bool("update", false, "regenerate testdata from a real PostgreSQL")

// goldenFile is testdata/NAME.golden.json: the columns the stream was read
// with and every decoded value as "GoType rendering".
type goldenFile struct {
	Columns []*desclog.Column
	Rows    [][]string
}

// render prints a value with its Go type, so a type change fails the golden.
func render(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case time.Time:
		return "time.Time " + x.Format(time.RFC3339Nano)
	case []byte:
		return "[]byte " + hex.EncodeToString(x)
	}
	return fmt.Sprintf("%T %v", v, v)
}

func readAll(t *testing.T, stream []byte, cols []*desclog.Column) [][]string {
	t.Helper()
	rd, err := NewReader(bytes.NewReader(stream), cols)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]any, len(rd.Columns()))
	var out [][]string
	for {
		err := rd.Next(dst)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("row %d: %v", rd.Rows()+1, err)
		}
		row := make([]string, len(dst))
		for i, v := range dst {
			row[i] = render(v)
		}
		out = append(out, row)
	}
}

// TestReaderGolden decodes testdata/types.copybin, captured from
// PostgreSQL 15 with SelectExprs over typesSchema's table, and compares with
// testdata/types.golden.json. -update recaptures both.
func TestReaderGolden(t *testing.T) {
	streamPath := filepath.Join("testdata", "types.copybin")
	goldenPath := filepath.Join("testdata", "types.golden.json")
	if *update {
		conn, cols := typesTable(t)
		stream := copyBinary(t, conn, nil, cols)
		g := goldenFile{Columns: cols, Rows: readAll(t, stream, cols)}
		js, err := json.MarshalIndent(g, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(streamPath, stream, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenPath, append(js, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stream, err := os.ReadFile(streamPath)
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(js, &g); err != nil {
		t.Fatalf("%s: %v", goldenPath, err)
	}
	got := readAll(t, stream, g.Columns)
	if len(got) != len(g.Rows) {
		t.Fatalf("%d rows, golden has %d", len(got), len(g.Rows))
	}
	live := 0
	for _, c := range g.Columns {
		if !c.Dropped {
			live++
		}
	}
	for r := range got {
		if len(got[r]) != live || len(g.Rows[r]) != live {
			t.Fatalf("row %d: %d values, golden %d, %d live columns", r+1, len(got[r]), len(g.Rows[r]), live)
		}
		for i := range got[r] {
			if got[r][i] != g.Rows[r][i] {
				t.Errorf("row %d column %d: got %q, golden %q", r+1, i+1, got[r][i], g.Rows[r][i])
			}
		}
	}
}
