package clickhouse

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkGolden compares got with testdata/name, which -update writes
// first; test names the test to run with -update.
func checkGolden(t *testing.T, name, got, test string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the rendering; run go test -run %s -update and review the diff.\ngot:\n%s", path, test, got)
	}
}

// onTopology renders statements (the golden DDL test's form: a comment
// line alone, or comment lines then one statement) as they run on topo
// (Topology.Statements, key for the sharding keys it reads): the
// statements, random ZooKeeper paths masked, or the refusal of a form
// topo does not run.
func onTopology(t *testing.T, topo Topology, key KeyFunc, statements ...string) []string {
	t.Helper()
	var out []string
	for _, stmt := range statements {
		if strings.HasPrefix(stmt, "-- ") && !strings.Contains(stmt, "\n") {
			out = append(out, stmt)
			continue
		}
		head, sql := "", stmt
		if i := strings.LastIndex(stmt, "\n"); strings.HasPrefix(stmt, "-- ") && i >= 0 {
			head, sql = stmt[:i+1], stmt[i+1:]
		}
		stmts, err := topo.Statements(strings.TrimSuffix(sql, ";"), key)
		if err != nil {
			if !errors.Is(err, ErrNotDistributable) {
				t.Fatalf("%s: %v", sql, err)
			}
			out = append(out, head+"-- refused: "+strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		for i := range stmts {
			stmts[i] = randomPath.ReplaceAllString(stmts[i], "/walshadow/<random>") + ";"
		}
		out = append(out, head+strings.Join(stmts, "\n"))
	}
	return out
}
