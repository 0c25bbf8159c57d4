package testrig

// This file owns the ZooKeeper server a ClickHouse cluster coordinates
// through: Debian's zookeeper package run standalone as a plain java
// process, with its config, data and log in a temporary directory.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// EnvJava overrides where the rig finds java for ZooKeeper.
const EnvJava = "WALSHADOW_JAVA"

// zooKeeperJar is Debian's zookeeper (libzookeeper-java); its manifest's
// Class-Path names the jars it depends on (netty, jackson, slf4j-api, ...),
// all in /usr/share/java.
const zooKeeperJar = "/usr/share/java/zookeeper.jar"

// zooKeeperLogJar binds slf4j to stderr, which goes to the log file: without
// a binding ZooKeeper logs nothing at all. Debian's libslf4j-java, a
// dependency of libzookeeper-java, ships it.
const zooKeeperLogJar = "/usr/share/java/slf4j-simple.jar"

// zooKeeperStartTimeout bounds the wait for ruok: the JVM answers in about
// a second on two idle cores, much later on two busy ones.
const zooKeeperStartTimeout = 60 * time.Second

// ZooKeeper is a standalone ZooKeeper server started by StartZooKeeper (or
// by StartClickHouseCluster), listening on 127.0.0.1 only.
type ZooKeeper struct {
	java      string
	classpath string
	dir       *serverDir
	cfgPath   string
	logPath   string
	port      int
	cmd       *exec.Cmd
	exited    chan struct{} // closed when the process has been reaped
	waitErr   error
}

// StartZooKeeper starts ZooKeeper on a free loopback port with its data in a
// temporary directory and waits until it answers ruok. It is stopped when
// the test ends.
func StartZooKeeper(t testing.TB) *ZooKeeper {
	t.Helper()
	skipIfShort(t, "ZooKeeper")
	java, classpath := ZooKeeperCommand(t)
	z, err := newZooKeeper(java, classpath, newServerDir(t, "walshadow-zk-", nil))
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		if err := z.configure(port); err != nil {
			t.Fatal(err)
		}
		if err = z.start(); err == nil {
			t.Cleanup(func() {
				if err := z.stop(); err != nil {
					t.Errorf("stopping zookeeper: %v", err)
				}
			})
			return z
		}
		if attempt == 0 && errors.Is(err, errAddrInUse) {
			t.Logf("zookeeper: %v; retrying on another port", err)
			continue
		}
		t.Fatalf("starting zookeeper: %v", err)
	}
}

// ZooKeeperCommand returns the java binary and the class path that run
// Debian's ZooKeeper, or skips the test (fails it under CI) when either is
// missing.
func ZooKeeperCommand(t testing.TB) (java, classpath string) {
	t.Helper()
	java, classpath, err := findZooKeeper()
	if err != nil {
		skipOrFatal(t, err.Error())
	}
	return java, classpath
}

func findZooKeeper() (java, classpath string, err error) {
	if java, err = findJava(); err != nil {
		return "", "", err
	}
	if _, err := os.Stat(zooKeeperJar); err != nil {
		return "", "", fmt.Errorf("%s not found: install zookeeper (go tool task deps:test)", zooKeeperJar)
	}
	classpath = zooKeeperJar
	if _, err := os.Stat(zooKeeperLogJar); err == nil {
		classpath += ":" + zooKeeperLogJar
	}
	return java, classpath, nil
}

// findJava looks at WALSHADOW_JAVA, then java on PATH, then Debian's default
// JVM and any other under /usr/lib/jvm.
func findJava() (string, error) {
	if bin := os.Getenv(EnvJava); bin != "" {
		if !isExecutable(bin) {
			return "", fmt.Errorf("java %s (from %s) is not an executable file", bin, EnvJava)
		}
		return bin, nil
	}
	if p, err := exec.LookPath("java"); err == nil {
		return p, nil
	}
	candidates := []string{"/usr/lib/jvm/default-java/bin/java"}
	if more, err := filepath.Glob("/usr/lib/jvm/*/bin/java"); err == nil {
		candidates = append(candidates, more...)
	}
	for _, p := range candidates {
		if isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("java not found on PATH nor under /usr/lib/jvm: install default-jre-headless (go tool task deps:test) or set %s", EnvJava)
}

// newZooKeeper makes a ZooKeeper with its config, data and log in dir;
// configure picks its port, start runs it.
func newZooKeeper(java, classpath string, dir *serverDir) (*ZooKeeper, error) {
	// The config directory leads the class path, as in Debian's zkEnv.sh.
	z := &ZooKeeper{java: java, classpath: dir.path + ":" + classpath, dir: dir,
		cfgPath: filepath.Join(dir.path, "zoo.cfg"), logPath: filepath.Join(dir.path, "zookeeper.log")}
	dir.logs = append(dir.logs, z.logPath)
	if err := os.MkdirAll(filepath.Join(dir.path, "data"), 0o755); err != nil {
		return nil, err
	}
	return z, nil
}

// configure writes zoo.cfg for the client port.
func (z *ZooKeeper) configure(port int) error {
	z.port = port
	// forceSync=no: the rig's servers never fsync (PostgreSQL runs with
	// fsync=off too). preAllocSize (KiB) keeps each transaction log at 4 MiB
	// instead of 64. The admin server would take port 8080. tickTime is the
	// default: sessions last 4 to 40 s, ClickHouse asks for 30.
	cfg := fmt.Sprintf(`tickTime=2000
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
maxClientCnxns=0
forceSync=no
preAllocSize=4096
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr
`, filepath.Join(z.dir.path, "data"), port)
	return os.WriteFile(z.cfgPath, []byte(cfg), 0o644)
}

// start runs the server on the configured port (data kept from an earlier
// run) and waits for ruok. An error carries the log's tail.
func (z *ZooKeeper) start() error {
	log, err := os.OpenFile(z.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close() // the child keeps its own descriptor
	logStart := fileSize(z.logPath)
	// A small serial-GC heap and the C1 compiler only: ZooKeeper does little
	// here, and the JVM starts faster and smaller on two cores.
	cmd := exec.Command(z.java, "-Xmx128m", "-Xms16m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Djava.awt.headless=true", "-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-cp", z.classpath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", z.cfgPath)
	cmd.Dir = z.dir.path
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, as for clickhouse-server: a Ctrl-C aimed at go
	// test leaves it to the cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", z.java, err)
	}
	exited := make(chan struct{})
	z.cmd, z.exited = cmd, exited
	go func() {
		z.waitErr = cmd.Wait()
		close(exited)
	}()
	deadline := time.Now().Add(zooKeeperStartTimeout)
	for {
		if z.ruok() == nil {
			return nil
		}
		select {
		case <-exited:
			z.cmd = nil
			msg := readFrom(z.logPath, logStart)
			if strings.Contains(msg, "Address already in use") {
				return fmt.Errorf("zookeeper: %w (port %d)", errAddrInUse, z.port)
			}
			return fmt.Errorf("zookeeper exited during start-up (%v); log:\n%s", z.waitErr, lastLines(msg, logTailLines))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			z.stop()
			return fmt.Errorf("zookeeper did not answer ruok on port %d within %v; log:\n%s", z.port, zooKeeperStartTimeout, lastLines(readFrom(z.logPath, logStart), logTailLines))
		}
	}
}

// ruok asks the server whether it is running (it answers imok, without a
// newline, and closes the connection), then whether it serves requests:
// srvr names its mode only then. A server that is running but not yet
// serving fails a client's first session, and 18.16 then crashes on its
// first statement ON CLUSTER (SIGSEGV in zkutil::ZooKeeper::createImpl).
func (z *ZooKeeper) ruok() error {
	answer, err := z.fourLetters("ruok")
	if err != nil {
		return err
	}
	if answer != "imok" {
		return fmt.Errorf("zookeeper answered ruok with %q", answer)
	}
	if answer, err = z.fourLetters("srvr"); err != nil {
		return err
	}
	if !strings.Contains(answer, "Mode: ") {
		return fmt.Errorf("zookeeper is not serving requests yet: srvr answered %q", answer)
	}
	return nil
}

// fourLetters sends one of ZooKeeper's four-letter commands.
func (z *ZooKeeper) fourLetters(cmd string) (string, error) {
	conn, err := net.DialTimeout("tcp", z.Addr(), time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return "", err
	}
	answer, err := io.ReadAll(conn)
	return string(answer), err
}

// stop terminates the server (SIGTERM, then SIGKILL after 10 s) and waits
// for it to exit.
func (z *ZooKeeper) stop() error {
	if z.cmd == nil {
		return nil
	}
	defer func() { z.cmd = nil }()
	select {
	case <-z.exited:
		return nil
	default:
	}
	return terminate(z.cmd, z.exited, 10*time.Second, "zookeeper")
}

// Addr is host:port of the client port.
func (z *ZooKeeper) Addr() string { return "127.0.0.1:" + strconv.Itoa(z.port) }

// Port is the client port.
func (z *ZooKeeper) Port() int { return z.port }

// Dir is the server's temporary directory (zoo.cfg, data, zookeeper.log).
func (z *ZooKeeper) Dir() string { return z.dir.path }

// Stop stops the server but keeps its data and port, so Start brings the
// same znodes back on the same address: a test takes ZooKeeper away from
// a cluster for a while.
func (z *ZooKeeper) Stop(t testing.TB) {
	t.Helper()
	if err := z.stop(); err != nil {
		t.Fatalf("stopping zookeeper: %v", err)
	}
}

// Start starts a server Stop stopped, on the same port with the same data,
// and waits until it answers ruok. A port taken meanwhile fails the test:
// the ClickHouse servers know only the old address.
func (z *ZooKeeper) Start(t testing.TB) {
	t.Helper()
	if z.cmd != nil {
		t.Fatal("zookeeper: Start on a running server")
	}
	if err := z.start(); err != nil {
		t.Fatalf("restarting zookeeper on port %d: %v", z.port, err)
	}
}
