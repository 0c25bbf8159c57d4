package testrig

import (
	"context"
	"testing"
)

// TestClickHouseStopStartServerKeepsDataAndPorts: a pipeline configured
// with the server's address finds the same tables on it after a restart.
func TestClickHouseStopStartServerKeepsDataAndPorts(t *testing.T) {
	ch := StartClickHouse(t)
	ch.HTTPQuery(t, "CREATE TABLE default.kept (id UInt32) ENGINE = MergeTree ORDER BY id")
	ch.HTTPQuery(t, "INSERT INTO default.kept VALUES (1), (2), (3)")
	native, httpURL := ch.NativeAddr(), ch.HTTPURL()

	ch.StopServer(t)
	if _, err := ch.Query(context.Background(), "SELECT 1"); err == nil {
		t.Fatal("the stopped server still answers")
	}
	ch.StartServer(t)
	if ch.NativeAddr() != native || ch.HTTPURL() != httpURL {
		t.Errorf("addresses moved: native %s → %s, http %s → %s", native, ch.NativeAddr(), httpURL, ch.HTTPURL())
	}
	if got := ch.HTTPQuery(t, "SELECT sum(id) FROM default.kept"); got != "6" {
		t.Errorf("sum(id) after the restart = %q, want 6", got)
	}
}
