package shadow

import (
	"strings"
	"testing"
)

func TestRenderPostgresqlConf(t *testing.T) {
	c := ShadowConfig{
		SocketDir: "/var/lib/walshadow/shadow", Port: 5433,
		PrimarySocketDir: "/run/walshadow it's", PrimaryPort: 6543, PrimaryUser: "walshadow",
		RestoreCommand:   `cp '/state/archive/%f' "%p" \ end`,
		PreloadLibraries: []string{"walshadow", "pg_stat_statements"},
		ExtraSettings:    map[string]string{"walshadow.socket_path": "/run/bridge.sock", "shared_buffers": "64MB"},
	}
	conf, err := renderPostgresqlConf(c, Floors{MaxConnections: 120, MaxWorkerProcesses: 8, MaxWALSenders: 10, MaxPreparedTransactions: 5, MaxLocksPerTransaction: 128})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"hot_standby = 'on'",
		"wal_level = 'replica'",
		"autovacuum = 'off'",
		"fsync = 'on'",
		"full_page_writes = 'on'",
		"listen_addresses = ''",
		"unix_socket_directories = '/var/lib/walshadow/shadow'",
		"port = '5433'",
		"shared_buffers = '32MB'",
		"max_connections = '120'",
		"max_worker_processes = '9'", // one more for the bridge worker
		"max_wal_senders = '10'",
		"max_prepared_transactions = '5'",
		"max_locks_per_transaction = '128'",
		// libpq quoting inside GUC quoting.
		`primary_conninfo = 'host=''/run/walshadow it\\''s'' port=6543 application_name=walshadow_shadow user=''walshadow'''`,
		`restore_command = 'cp ''/state/archive/%f'' "%p" \\ end'`,
		"recovery_target_timeline = 'latest'",
		"allow_in_place_tablespaces = 'on'",
		"shared_preload_libraries = 'walshadow,pg_stat_statements'",
		"walshadow.socket_path = '/run/bridge.sock'",
	} {
		if !strings.Contains(conf, "\n"+line+"\n") {
			t.Errorf("missing line %s", line)
		}
	}
	// Extra settings come after the managed ones, so a later shared_buffers wins.
	if strings.Index(conf, "shared_buffers = '64MB'") < strings.Index(conf, "shared_buffers = '32MB'") {
		t.Error("extra settings must follow the defaults")
	}
	t.Log("\n" + conf)

	c.PrimarySocketDir = ""
	conf, err = renderPostgresqlConf(c, Floors{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(conf, "primary_conninfo") {
		t.Error("primary_conninfo written without a walsender")
	}
	c.RestoreCommand = "cp x\ny"
	if _, err := renderPostgresqlConf(c, Floors{}); err == nil {
		t.Error("a line break in a value was accepted")
	}
}

func TestShadowConfigValidation(t *testing.T) {
	ok := ShadowConfig{Dir: "/tmp/x"}
	if _, err := ok.resolve(); err != nil {
		t.Skip(err) // no usable OS user here
	}
	cases := map[string]ShadowConfig{
		"no dir":            {},
		"port":              {Dir: "/tmp/x", Port: 70000},
		"long socket":       {Dir: "/tmp/x", SocketDir: "/" + strings.Repeat("s", 100)},
		"relative socket":   {Dir: "/tmp/x", SocketDir: "sock"},
		"walsender port":    {Dir: "/tmp/x", PrimarySocketDir: "/run/w"},
		"managed extra":     {Dir: "/tmp/x", ExtraSettings: map[string]string{"hot_standby": "off"}},
		"managed floor":     {Dir: "/tmp/x", ExtraSettings: map[string]string{"MAX_CONNECTIONS": "5"}},
		"include":           {Dir: "/tmp/x", ExtraSettings: map[string]string{"include": "/etc/passwd"}},
		"injected name":     {Dir: "/tmp/x", ExtraSettings: map[string]string{"a = 1\nb": "x"}},
		"library with list": {Dir: "/tmp/x", PreloadLibraries: []string{"a,b"}},
	}
	for name, c := range cases {
		if _, err := c.resolve(); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	r, err := ok.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if r.Port != 5432 || r.SocketDir != "/tmp/x" || r.BinDir != DefaultBinDir || r.Database != "postgres" ||
		r.LogFile != "/tmp/x/log/walshadow_shadow.log" || r.StartTimeout == 0 {
		t.Errorf("defaults: %+v", r.ShadowConfig)
	}
}
