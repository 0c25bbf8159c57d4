package input_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// buildBinary builds cmd/walshadow once for the test.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "walshadow")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/walshadow")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building walshadow: %v\n%s", err, out)
	}
	return bin
}

type process struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	log  strings.Builder
	done chan struct{}
}

func startWalshadow(t *testing.T, bin, config string, env []string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, "run", config), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = p.cmd.Stdout
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("walshadow output:\n%s", p.output())
		}
	})
	return p
}

func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// shadowReplay reads the shadow's replay position over its unix socket.
func shadowReplay(ctx context.Context, stateDir string, port int) (wal.LSN, error) {
	conn, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", filepath.Join(stateDir, "shadow"), port))
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var s *string
	if err := conn.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn()::text").Scan(&s); err != nil || s == nil {
		return 0, fmt.Errorf("replay lsn: %v", err)
	}
	return wal.ParseLSN(*s)
}

func waitShadow(t *testing.T, p *process, src *testrig.Postgres, stateDir string, port int) {
	t.Helper()
	target := src.CurrentLSN(t)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		got, err := shadowReplay(context.Background(), stateDir, port)
		if err == nil && got >= target {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("shadow at %s (%v), source at %s\n%s", got, err, target, p.output())
		}
		select {
		case <-p.done:
			t.Fatalf("walshadow exited: %v\n%s", p.cmd.ProcessState, p.output())
		case <-time.After(300 * time.Millisecond):
		}
	}
}

var startLine = regexp.MustCompile(`session started.*start_lsn=([0-9A-F]+/[0-9A-F]+)`)

// TestKillWalshadowResumes runs the real binary on a pipeline that reads the
// source through pg_physical_wal, SIGKILLs it mid-stream, and starts it
// again: it must resume at its stored LSN without bootstrapping the shadow
// again, and the shadow must catch up.
func TestKillWalshadowResumes(t *testing.T) {
	src := testrig.StartPostgres(t, testrig.WithMaxPreparedTransactions(5))
	src.PGBench(t, 2, testrig.PGBenchOptions{})
	bin := buildBinary(t)

	stateDir, err := os.MkdirTemp("", "walshadow-kill-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(stateDir, 0o711)
	defer func() {
		// The shadow postmaster outlives a SIGKILLed walshadow; stop it.
		exec.Command("runuser", "-u", "postgres", "--", filepath.Join(src.BinDir(), "pg_ctl"), "-D",
			filepath.Join(stateDir, "shadow"), "-m", "immediate", "stop").Run()
		if !t.Failed() {
			os.RemoveAll(stateDir)
		}
	}()
	port := testrig.FreePort(t)
	osUser := testrig.ServerOSUser()
	config := filepath.Join(stateDir, "pipeline.yaml")
	os.WriteFile(config, []byte(fmt.Sprintf(`
logger:
  level: info
walshadow:
  - label: main
    source_dsn: ${PG_SOURCE_DSN}
    state_dir: ${WALSHADOW_STATE_DIR}
    slot: { name: walshadow_kill }
    shadow: { bin_dir: %s, os_user: %s, port: %d }
    status_interval: 1s
input:
  pg_physical_wal:
    session: main
pipeline:
  threads: 1
  processors:
    - walshadow_decode:
        session: main
output:
  drop: {}
`, src.BinDir(), osUser, port)), 0o600)
	env := []string{"PG_SOURCE_DSN=" + src.DSN(), "WALSHADOW_STATE_DIR=" + stateDir}

	p := startWalshadow(t, bin, config, env)
	src.PGBench(t, 2, testrig.PGBenchOptions{NoInit: true, Transactions: 500})
	src.Exec(t, "CREATE TABLE killed_mid (id int PRIMARY KEY, v text)")
	waitShadow(t, p, src, stateDir, port)
	marker := filepath.Join(stateDir, "shadow", "walshadow.bootstrap_complete")
	before, err := os.Stat(marker)
	if err != nil {
		t.Fatal(err)
	}

	// Kill it while pgbench writes.
	load := make(chan struct{})
	go func() {
		defer close(load)
		src.PGBench(t, 2, testrig.PGBenchOptions{NoInit: true, Duration: 4 * time.Second})
	}()
	time.Sleep(2 * time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	<-load
	progress, err := os.ReadFile(filepath.Join(stateDir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	stored := regexp.MustCompile(`"restart_lsn": "([0-9A-F/]+)"`).FindSubmatch(progress)
	src.Exec(t, "ALTER TABLE killed_mid ADD COLUMN after_kill int")

	p2 := startWalshadow(t, bin, config, env)
	waitShadow(t, p2, src, stateDir, port)
	m := startLine.FindStringSubmatch(p2.output())
	if m == nil || stored == nil || m[1] != string(stored[1]) {
		t.Fatalf("restart position %v, stored %s\n%s", m, progress, p2.output())
	}
	after, _ := os.Stat(marker)
	if !after.ModTime().Equal(before.ModTime()) || strings.Contains(p2.output(), "bootstrapped the catalog-only shadow") {
		t.Fatal("the shadow was bootstrapped again after the kill")
	}
	// The ALTER made after the kill is on the shadow.
	conn, err := pgx.Connect(context.Background(), fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", filepath.Join(stateDir, "shadow"), port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_attribute WHERE attrelid = 'killed_mid'::regclass AND attname = 'after_kill'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("ALTER after the kill not on the shadow: %d %v", n, err)
	}
	// A clean stop stops the shadow too.
	p2.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p2.done:
	case <-time.After(90 * time.Second):
		t.Fatalf("walshadow did not stop on SIGTERM\n%s", p2.output())
	}
}
