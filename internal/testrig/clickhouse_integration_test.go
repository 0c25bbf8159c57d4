package testrig

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestClickHouse(t *testing.T) {
	ch := StartClickHouse(t)
	version := ch.HTTPQuery(t, "SELECT version()")
	if !regexp.MustCompile(`^\d+\.\d+\.\d+`).MatchString(version) {
		t.Fatalf("SELECT version() = %q", version)
	}
	t.Logf("ClickHouse %s, native %s, HTTP %s", version, ch.NativeAddr(), ch.HTTPURL())

	ch.HTTPQuery(t, "CREATE TABLE rig_t (id UInt32, s String) ENGINE = MergeTree ORDER BY id")
	ch.HTTPQuery(t, "INSERT INTO rig_t (id, s) VALUES (1, 'a'), (2, 'b')")
	if got := ch.HTTPQuery(t, "SELECT count(), sum(id) FROM rig_t FORMAT TSV"); got != "2\t3" {
		t.Errorf("count, sum = %q, want \"2\\t3\"", got)
	}
	if _, err := ch.Query(context.Background(), "SELECT no_such_column FROM rig_t"); err == nil || !strings.Contains(err.Error(), "HTTP 4") {
		t.Errorf("bad query: want an HTTP 4xx error, got %v", err)
	}

	// Everything lives in the temp dir: data, logs, preprocessed config.
	for _, p := range []string{"data/metadata/default/rig_t.sql", "log/clickhouse-server.log"} {
		if _, err := os.Stat(filepath.Join(ch.Dir(), p)); err != nil {
			t.Errorf("expected %s in the server dir: %v", p, err)
		}
	}
	// The native port accepts connections (clickhouse-go/v2 will use it).
	conn, err := net.DialTimeout("tcp", ch.NativeAddr(), 5*time.Second)
	if err != nil {
		t.Fatalf("native port: %v", err)
	}
	conn.Close()
	ch.Stop(t)
	if _, err := ch.Query(context.Background(), "SELECT 1"); err == nil {
		t.Error("server still answers after Stop")
	}
}
