package session

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/shadow"
	"github.com/walshadow/walshadow/internal/testrig"
)

// buildPgext builds pgext/ into a temporary directory readable by the
// shadow's OS user and returns it.
func buildPgext(t *testing.T, pgBinDir string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "walshadow-pgext-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	src := filepath.Join("..", "..", "pgext")
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if n := e.Name(); n == "Makefile" || strings.HasSuffix(n, ".c") || strings.HasSuffix(n, ".h") {
			b, _ := os.ReadFile(filepath.Join(src, n))
			os.WriteFile(filepath.Join(dir, n), b, 0o644)
		}
	}
	out, err := exec.Command("make", "-C", dir, "PG_CONFIG="+filepath.Join(pgBinDir, "pg_config")).CombinedOutput()
	if err != nil {
		if testrig.InCI() {
			t.Fatalf("building pgext: %v\n%s", err, out)
		}
		t.Skipf("cannot build pgext (install postgresql-server-dev-15, make, gcc): %v\n%s", err, out)
	}
	return dir
}

// TestSessionWithBridge runs a session whose shadow preloads the bridge:
// the session reaches it at start, and it decodes datums and scans the
// shadow's catalogs as the source has them.
func TestSessionWithBridge(t *testing.T) {
	src := testrig.StartPostgres(t)
	src.Exec(t, "CREATE TABLE br_t (id int PRIMARY KEY, v text)")
	cfg := sessionConfig(t, src, stateDir(t))
	cfg.BridgeLibDir = buildPgext(t, src.BinDir())
	s := New(cfg, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	go func() {
		for {
			b, err := s.Next(context.Background())
			if err != nil {
				return
			}
			s.Ack(b)
		}
	}()
	br := s.Bridge()
	if br == nil {
		t.Fatal("no bridge although configured")
	}
	src.Exec(t, "ALTER TABLE br_t ADD COLUMN n numeric(8,2)")
	waitCaughtUp(t, s, src, time.Minute)

	// DECODE: an int4 by value and a short-header varlena text.
	int4 := binary.LittleEndian.AppendUint32(nil, uint32(0xFFFFFFF6)) // -10
	text := append([]byte{byte((5+1)<<1 | 1)}, "hello"...)
	res, err := br.Decode(ctx, []shadow.DecodeItem{{TypeOid: 23, Data: int4}, {TypeOid: 25, Data: text}})
	if err != nil || len(res) != 2 || res[0].Text != "-10" || res[1].Text != "hello" || res[0].Err != "" {
		t.Fatalf("decode: %+v %v", res, err)
	}
	// SCAN: the committed view of br_t's pg_attribute rows has the ALTER.
	oid := uint32(src.QueryInt(t, "SELECT 'br_t'::regclass::oid::int8"))
	scan, err := br.Scan(ctx, shadow.CatalogAttribute, 0, []uint32{oid})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, row := range scan.Rows {
		if row[2] != nil {
			names = append(names, *row[2])
		}
	}
	if strings.Join(names, ",") != "id,v,n" {
		t.Fatalf("scan of br_t's attributes: %v", names)
	}
}
