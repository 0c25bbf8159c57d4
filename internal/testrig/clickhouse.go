package testrig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// clickHouseStartTimeout bounds the wait for SELECT 1 to answer; 18.16 on two
// cores is up in about a second.
const clickHouseStartTimeout = 60 * time.Second

// ClickHouse is a clickhouse-server process started by StartClickHouse. It
// runs as the current user (18.16 does not refuse root) with everything in
// its own temporary directory.
type ClickHouse struct {
	bin      string
	dir      *serverDir
	logPath  string
	errPath  string
	tcpPort  int
	httpPort int
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the process has been reaped
	waitErr  error
	client   *http.Client
	// frozen: FreezeServer stopped the process (SIGSTOP); stop and
	// KillServer continue it first, or SIGTERM would wait for ever.
	frozen bool

	// Set for a node of a ClickHouseCluster only: the cluster it belongs
	// to, its index in Nodes and its replication (interserver) port.
	cluster         *ClickHouseCluster
	node            int
	interserverPort int
}

// StartClickHouse starts clickhouse-server listening on 127.0.0.1 only, on
// free HTTP and native ports, with a default user without password, and
// waits until SELECT 1 answers over HTTP. It is stopped when the test ends.
func StartClickHouse(t testing.TB) *ClickHouse {
	t.Helper()
	skipIfShort(t, "ClickHouse")
	ch := &ClickHouse{bin: ClickHouseBin(t), client: &http.Client{Timeout: 2 * time.Minute}}
	ch.dir = newServerDir(t, "walshadow-ch-", nil)
	if err := ch.prepareDir(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ch.stop(); err != nil {
			t.Errorf("stopping clickhouse: %v", err)
		}
	})
	for attempt := 0; ; attempt++ {
		err := ch.start()
		if err == nil {
			return ch
		}
		if attempt == 0 && errors.Is(err, errAddrInUse) {
			t.Logf("clickhouse: %v; retrying on other ports", err)
			continue
		}
		t.Fatalf("starting clickhouse: %v", err)
	}
}

var errAddrInUse = errors.New("address already in use")

// prepareDir lays out ch.dir (which exists) for a server: its
// subdirectories, users.xml, and the log paths.
func (ch *ClickHouse) prepareDir() error {
	ch.logPath = filepath.Join(ch.dir.path, "log", "clickhouse-server.log")
	ch.errPath = filepath.Join(ch.dir.path, "log", "clickhouse-server.err.log")
	ch.dir.logs = []string{ch.logPath, filepath.Join(ch.dir.path, "stdout.log")}
	for _, sub := range []string{"data", "tmp", "user_files", "format_schemas", "log"} {
		if err := os.Mkdir(filepath.Join(ch.dir.path, sub), 0o755); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(ch.dir.path, "users.xml"), []byte(clickHouseUsersXML), 0o644)
}

func (ch *ClickHouse) start() error {
	var err error
	if ch.tcpPort, err = freePort(); err != nil {
		return err
	}
	if ch.httpPort, err = freePort(); err != nil {
		return err
	}
	configPath := filepath.Join(ch.dir.path, "config.xml")
	if err := os.WriteFile(configPath, []byte(ch.configXML()), 0o644); err != nil {
		return err
	}
	stdout, err := os.OpenFile(filepath.Join(ch.dir.path, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer stdout.Close() // the child keeps its own descriptor
	logStart := fileSize(ch.errPath)
	cmd := exec.Command(ch.bin, "--config-file="+configPath)
	cmd.Dir = ch.dir.path
	cmd.Stdout, cmd.Stderr = stdout, stdout
	// Its own process group, so a Ctrl-C aimed at go test does not kill it
	// before the cleanup can stop it and keep the logs consistent.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	ch.cmd = cmd
	ch.exited = make(chan struct{})
	go func() {
		ch.waitErr = cmd.Wait()
		close(ch.exited)
	}()

	deadline := time.Now().Add(clickHouseStartTimeout)
	for {
		if _, err := ch.query(context.Background(), "SELECT 1"); err == nil {
			return nil
		}
		select {
		case <-ch.exited:
			msg := readFrom(ch.errPath, logStart)
			if strings.Contains(msg, "Address already in use") {
				return fmt.Errorf("%w (ports %d, %d)", errAddrInUse, ch.tcpPort, ch.httpPort)
			}
			return fmt.Errorf("clickhouse-server exited during start-up (%v); error log:\n%s", ch.waitErr, lastLines(msg, logTailLines))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			ch.stop()
			return fmt.Errorf("clickhouse-server did not answer SELECT 1 on port %d within %v", ch.httpPort, clickHouseStartTimeout)
		}
	}
}

// Stop terminates the server (SIGTERM, then SIGKILL after 30 s) and waits for
// it to exit.
func (ch *ClickHouse) Stop(t testing.TB) {
	t.Helper()
	if err := ch.stop(); err != nil {
		t.Fatal(err)
	}
}

func (ch *ClickHouse) stop() error {
	if ch.cmd == nil {
		return nil
	}
	defer func() { ch.cmd = nil }()
	select {
	case <-ch.exited:
		return nil
	default:
	}
	// The server waits for open connections, keep-alive ones included,
	// before it exits.
	ch.client.CloseIdleConnections()
	ch.thaw()
	return terminate(ch.cmd, ch.exited, 30*time.Second, "clickhouse-server")
}

// terminate sends cmd SIGTERM, then SIGKILL after grace, and waits until
// exited is closed (the process reaped).
func terminate(cmd *exec.Cmd, exited <-chan struct{}, grace time.Duration, name string) error {
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-exited:
		return nil
	case <-time.After(grace):
	}
	if err := cmd.Process.Kill(); err != nil {
		return err
	}
	<-exited
	return fmt.Errorf("%s ignored SIGTERM for %v and was killed", name, grace)
}

// NativeAddr is host:port of the native protocol (clickhouse-go/v2).
func (ch *ClickHouse) NativeAddr() string { return "127.0.0.1:" + strconv.Itoa(ch.tcpPort) }

// DSN is a clickhouse-go DSN of this server alone (user default, no
// password) with database as the default database.
func (ch *ClickHouse) DSN(database string) string {
	return "clickhouse://default:@" + ch.NativeAddr() + "/" + database
}

// HTTPURL is the base URL of the HTTP interface.
func (ch *ClickHouse) HTTPURL() string { return "http://127.0.0.1:" + strconv.Itoa(ch.httpPort) + "/" }

// Dir is the server's temporary directory (config, data, logs).
func (ch *ClickHouse) Dir() string { return ch.dir.path }

// HTTPQuery runs sql over HTTP and returns the response body without its
// final newline; an error fails the test.
func (ch *ClickHouse) HTTPQuery(t testing.TB, sql string) string {
	t.Helper()
	out, err := ch.query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Query runs sql over HTTP and returns the body without its final newline.
func (ch *ClickHouse) Query(ctx context.Context, sql string) (string, error) {
	return ch.query(ctx, sql)
}

// QueryWithSettings is Query with settings for this query alone (as SET
// would give a session), e.g. insert_distributed_sync or
// distributed_ddl_task_timeout: 18.16 has no SETTINGS clause on DDL.
func (ch *ClickHouse) QueryWithSettings(ctx context.Context, sql string, settings map[string]string) (string, error) {
	return ch.querySettings(ctx, sql, settings)
}

func (ch *ClickHouse) query(ctx context.Context, sql string) (string, error) {
	return ch.querySettings(ctx, sql, nil)
}

func (ch *ClickHouse) querySettings(ctx context.Context, sql string, settings map[string]string) (string, error) {
	params := url.Values{"database": {"default"}}
	for k, v := range settings {
		params.Set(k, v)
	}
	// The query goes in the body: 18.16 accepts any statement there and the
	// URL stays short.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ch.HTTPURL()+"?"+params.Encode(), strings.NewReader(sql))
	if err != nil {
		return "", err
	}
	resp, err := ch.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("clickhouse %q: HTTP %d: %s", abbreviate(sql), resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return strings.TrimSuffix(string(body), "\n"), nil
}

func (ch *ClickHouse) configXML() string {
	d := ch.dir.path
	// No interserver_http_port unless the server is a cluster node: without
	// replicated tables it stays disabled.
	return fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
    <logger>
        <level>information</level>
        <log>%[1]s/log/clickhouse-server.log</log>
        <errorlog>%[1]s/log/clickhouse-server.err.log</errorlog>
        <size>100M</size>
        <count>1</count>
        <console>0</console>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <http_port>%[2]d</http_port>
    <tcp_port>%[3]d</tcp_port>
    <path>%[1]s/data/</path>
    <tmp_path>%[1]s/tmp/</tmp_path>
    <user_files_path>%[1]s/user_files/</user_files_path>
    <format_schema_path>%[1]s/format_schemas/</format_schema_path>
    <users_config>%[1]s/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <mark_cache_size>268435456</mark_cache_size>
    <uncompressed_cache_size>268435456</uncompressed_cache_size>
    <max_concurrent_queries>100</max_concurrent_queries>
    <mlock_executable>false</mlock_executable>
    <!-- Every part created, merged and removed: what benchmarks read to say
         how much merging an ingest cost the server. -->
    <part_log>
        <database>system</database>
        <table>part_log</table>
        <flush_interval_milliseconds>1000</flush_interval_milliseconds>
    </part_log>
%[4]s</yandex>
`, d, ch.httpPort, ch.tcpPort, ch.clusterXML())
}

// clickHouseUsersXML: user default without password, from loopback only.
// max_memory_usage is below 18.16's default (10 GB) but above what an
// insert into PostgreSQL's widest table takes: a part written to a
// MergeTree holds 1 MiB buffers per column stream, so one row of 1600
// Nullable columns (pg_regress' extra_wide_table) needs more than 3.7 GB
// (measured: refused at 3.73 GiB, written under 8 GB).
const clickHouseUsersXML = `<?xml version="1.0"?>
<yandex>
    <profiles>
        <default>
            <max_memory_usage>8000000000</max_memory_usage>
        </default>
    </profiles>
    <users>
        <default>
            <password></password>
            <networks>
                <ip>127.0.0.1</ip>
                <ip>::1</ip>
            </networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas>
        <default>
            <interval>
                <duration>3600</duration>
                <queries>0</queries>
                <errors>0</errors>
                <result_rows>0</result_rows>
                <read_rows>0</read_rows>
                <execution_time>0</execution_time>
            </interval>
        </default>
    </quotas>
</yandex>
`

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// StopServer stops the server (as Stop) but keeps its data directory and
// ports, so StartServer brings the same tables back on the same address,
// e.g. to take ClickHouse away from a running pipeline for a while.
func (ch *ClickHouse) StopServer(t testing.TB) {
	t.Helper()
	if err := ch.stop(); err != nil {
		t.Fatalf("stopping clickhouse: %v", err)
	}
}

// KillServer SIGKILLs the server, as a crash or an OOM kill would, and
// waits for it to exit; its data directory and ports stay for StartServer.
func (ch *ClickHouse) KillServer(t testing.TB) {
	t.Helper()
	if ch.cmd == nil {
		t.Fatal("clickhouse: KillServer on a stopped server")
	}
	defer func() { ch.cmd = nil }()
	select {
	case <-ch.exited:
		return
	default:
	}
	ch.client.CloseIdleConnections()
	ch.thaw()
	if err := ch.cmd.Process.Kill(); err != nil {
		t.Fatalf("killing clickhouse: %v", err)
	}
	<-ch.exited
}

// StartServer starts a server StopServer stopped, with the same config,
// data and ports, and waits until SELECT 1 answers. A port taken by
// another process meanwhile fails the test: the pipeline under test knows
// only the old address.
func (ch *ClickHouse) StartServer(t testing.TB) {
	t.Helper()
	if ch.cmd != nil {
		t.Fatal("clickhouse: StartServer on a running server")
	}
	if err := ch.restartOnSamePorts(); err != nil {
		t.Fatalf("restarting clickhouse on ports %d, %d: %v", ch.tcpPort, ch.httpPort, err)
	}
}

// restartOnSamePorts is start without choosing ports or writing the
// config: config.xml still names the old ones.
func (ch *ClickHouse) restartOnSamePorts() error {
	stdout, err := os.OpenFile(filepath.Join(ch.dir.path, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer stdout.Close()
	logStart := fileSize(ch.errPath)
	cmd := exec.Command(ch.bin, "--config-file="+filepath.Join(ch.dir.path, "config.xml"))
	cmd.Dir = ch.dir.path
	cmd.Stdout, cmd.Stderr = stdout, stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	ch.cmd, ch.exited = cmd, exited
	go func() {
		ch.waitErr = cmd.Wait()
		close(exited)
	}()
	deadline := time.Now().Add(clickHouseStartTimeout)
	for {
		if _, err := ch.query(context.Background(), ch.readyQuery()); err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("clickhouse-server exited during start-up (%v); error log:\n%s", ch.waitErr, lastLines(readFrom(ch.errPath, logStart), logTailLines))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			ch.stop()
			return fmt.Errorf("clickhouse-server did not answer SELECT 1 on port %d within %v", ch.httpPort, clickHouseStartTimeout)
		}
	}
}

// FreezeServer stops the server process with SIGSTOP, as a stalled machine
// would: its ports stay bound and connections open but nothing answers,
// and to ZooKeeper and its peers it looks hung rather than gone.
// ThawServer continues it; StopServer and KillServer continue it first.
func (ch *ClickHouse) FreezeServer(t testing.TB) {
	t.Helper()
	if ch.cmd == nil {
		t.Fatal("clickhouse: FreezeServer on a stopped server")
	}
	if ch.frozen {
		return
	}
	if err := ch.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("freezing clickhouse: %v", err)
	}
	ch.frozen = true
}

// ThawServer continues a server FreezeServer stopped (SIGCONT).
func (ch *ClickHouse) ThawServer(t testing.TB) {
	t.Helper()
	if ch.cmd == nil {
		t.Fatal("clickhouse: ThawServer on a stopped server")
	}
	if err := ch.thaw(); err != nil {
		t.Fatalf("thawing clickhouse: %v", err)
	}
}

func (ch *ClickHouse) thaw() error {
	if !ch.frozen {
		return nil
	}
	if err := ch.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	ch.frozen = false
	return nil
}

// readyQuery answers once the server can serve what a test sends it. A
// cluster node must also have its ZooKeeper session: 18.16 crashes
// (SIGSEGV in zkutil::ZooKeeper::createImpl) on a statement ON CLUSTER
// that comes before it, a fraction of a second after it answers SELECT 1.
func (ch *ClickHouse) readyQuery() string {
	if ch.cluster != nil {
		return "SELECT count() FROM system.zookeeper WHERE path = '/'"
	}
	return "SELECT 1"
}
