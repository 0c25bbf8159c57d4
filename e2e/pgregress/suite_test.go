package pgregress_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
)

// The prepared suite's paths, as scripts/pgregress.sh prints them.
type suite struct {
	pgRegress string // the pg_regress binary
	inputDir  string // src/test/regress: sql/, expected/, data/, resultmap
	schedule  string // parallel_schedule
	dlpath    string // regress.so, autoinc.so, refint.so
	version   string // the Debian version of the source
	installed string // the installed postgresql-15's version
}

// prepareScript is the script that prepares the suite, from this
// package's directory (go test runs a test in its package's directory).
const prepareScript = "../../scripts/pgregress.sh"

// prepareSuite runs scripts/pgregress.sh (idempotent: a prepared cache is
// reused at once) and returns what it prepared. When the script cannot
// prepare the suite (no root for apt, no network, no source served), the
// test is skipped with the script's output, or fails under CI=true: CI
// must not pass by skipping.
func prepareSuite(t *testing.T) suite {
	t.Helper()
	script, err := filepath.Abs(prepareScript)
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	cmd := exec.Command("bash", script)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		reason := fmt.Sprintf("scripts/pgregress.sh could not prepare PostgreSQL's regression suite (%v):\n%s%s", err, stdout.String(), stderr.String())
		if testrig.InCI() {
			t.Fatalf("%s\n(CI=true: refusing to skip)", reason)
		}
		t.Skip(reason)
	}
	vals := map[string]string{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && strings.HasPrefix(k, "PGREGRESS_") {
			vals[k] = v
		}
	}
	s := suite{
		pgRegress: vals["PGREGRESS_PG_REGRESS"], inputDir: vals["PGREGRESS_INPUTDIR"], schedule: vals["PGREGRESS_SCHEDULE"],
		dlpath: vals["PGREGRESS_DLPATH"], version: vals["PGREGRESS_VERSION"], installed: vals["PGREGRESS_INSTALLED"],
	}
	if s.pgRegress == "" || s.inputDir == "" || s.schedule == "" || s.dlpath == "" {
		t.Fatalf("scripts/pgregress.sh succeeded but did not print every path:\n%s%s", stdout.String(), stderr.String())
	}
	t.Logf("regression suite of postgresql-15 %s (installed %s), prepared in %v: %s", s.version, s.installed,
		time.Since(started).Round(100*time.Millisecond), s.inputDir)
	return s
}

// copyForServer copies what the source server itself reads into dir, a
// directory the server's OS user can traverse: the suite's input files
// (COPY FROM reads data/ server-side) and the C modules (loaded by
// CREATE FUNCTION ... LANGUAGE C, and by the shadow when it renders a
// value of a type whose output function is in regress.so). The prepared
// cache may sit where the postgres user cannot reach (under /root, say),
// and a copy cannot change under a running test. It returns the copies'
// input directory, schedule and dlpath.
func (s suite) copyForServer(t *testing.T, dir string) suite {
	t.Helper()
	c := s
	c.inputDir = filepath.Join(dir, "regress")
	c.dlpath = filepath.Join(dir, "lib")
	c.schedule = filepath.Join(c.inputDir, filepath.Base(s.schedule))
	for _, sub := range []string{"sql", "expected", "data"} {
		if err := copyTree(filepath.Join(s.inputDir, sub), filepath.Join(c.inputDir, sub)); err != nil {
			t.Fatalf("copying the suite: %v", err)
		}
	}
	for _, f := range []string{"resultmap", filepath.Base(s.schedule)} {
		if err := copyOne(filepath.Join(s.inputDir, f), filepath.Join(c.inputDir, f), 0o644); err != nil {
			t.Fatalf("copying the suite: %v", err)
		}
	}
	if skip := os.Getenv("WALSHADOW_PGREGRESS_SKIP"); skip != "" {
		if err := skipTests(c.schedule, strings.Split(skip, ",")); err != nil {
			t.Fatalf("WALSHADOW_PGREGRESS_SKIP=%q: %v", skip, err)
		}
		t.Logf("WALSHADOW_PGREGRESS_SKIP: the schedule runs without %s (a diagnosis, not the acceptance run)", skip)
	}
	if err := os.MkdirAll(c.dlpath, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"regress.so", "autoinc.so", "refint.so"} {
		if err := copyOne(filepath.Join(s.dlpath, m), filepath.Join(c.dlpath, m), 0o755); err != nil {
			t.Fatalf("copying the suite's modules: %v", err)
		}
	}
	return c
}

// copyTree copies the regular files under src to dst, world-readable.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			return copyOne(path, target, 0o644)
		}
		return nil
	})
}

func copyOne(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, mode) // past the umask
}

// makeOutputDir makes pg_regress's output directory with its results/
// subdirectory already there and writable by everyone: pg_regress (this
// process's user) writes the tests' output into it, and the server (the
// postgres OS user) writes the files of server-side COPY TO and lo_export
// (misc, copy, largeobject) there too, then reads them back.
func makeOutputDir(t *testing.T, dir string) string {
	t.Helper()
	results := filepath.Join(dir, "results")
	if err := os.MkdirAll(results, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, results} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// suiteRun is one run of pg_regress.
type suiteRun struct {
	duration time.Duration
	exitCode int    // 0: every test passed, 1: some failed, 2: could not run
	summary  string // its closing line, e.g. "3 of 214 tests failed."
	logPath  string // pg_regress's own output
	outDir   string // regression.out, regression.diffs, results/
}

// pgRegressSummary matches pg_regress's closing line.
var pgRegressSummary = regexp.MustCompile(`(?m)^\s*((All \d+ tests passed\.)|(\d+ of \d+ tests failed(, \d+ of these failures ignored)?\.)|(\d+ of \d+ tests passed, \d+ failed test\(s\) ignored\.))\s*$`)

// runSuite runs `pg_regress --use-existing` with parallel_schedule against
// the database regression of src, as `make installcheck-parallel` does
// (--max-concurrent-tests=20), until it ends or ctx is done. A test that
// fails is not an error: only a pg_regress that could not run (exit
// status 2, or killed) is.
func runSuite(ctx context.Context, s suite, host string, port int, user, bindir, outDir string) (suiteRun, error) {
	run := suiteRun{logPath: filepath.Join(outDir, "pg_regress.log"), outDir: outDir}
	logFile, err := os.Create(run.logPath)
	if err != nil {
		return run, err
	}
	defer logFile.Close()
	args := []string{
		"--use-existing", "--dbname=" + regressionDB,
		"--host=" + host, "--port=" + strconv.Itoa(port), "--user=" + user,
		"--bindir=" + bindir,
		"--inputdir=" + s.inputDir, "--outputdir=" + outDir, "--dlpath=" + s.dlpath,
		"--schedule=" + s.schedule, "--max-concurrent-tests=20",
	}
	cmd := exec.CommandContext(ctx, s.pgRegress, args...)
	cmd.Dir = outDir
	cmd.Env = testrig.CleanPGEnv() // pg_regress sets the PG* it wants
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.WaitDelay = 10 * time.Second
	started := time.Now()
	err = cmd.Run()
	run.duration = time.Since(started)
	out, _ := os.ReadFile(run.logPath)
	if m := pgRegressSummary.FindSubmatch(out); m != nil {
		run.summary = string(m[1])
	}
	if ctx.Err() != nil {
		return run, fmt.Errorf("pg_regress did not finish within the test's budget (%v): %w; its output is in %s", run.duration.Round(time.Second), ctx.Err(), run.logPath)
	}
	if err != nil {
		exit, ok := err.(*exec.ExitError)
		if !ok {
			return run, fmt.Errorf("running pg_regress: %w", err)
		}
		run.exitCode = exit.ExitCode()
		if run.exitCode != 1 {
			return run, fmt.Errorf("pg_regress could not run the suite (%v):\n%s", err, tail(string(out), 40))
		}
	}
	if run.summary == "" {
		return run, fmt.Errorf("pg_regress exited %d without its summary line:\n%s", run.exitCode, tail(string(out), 40))
	}
	return run, nil
}

// failedTests lists the tests pg_regress 15 reported as failed: the lines
// "test name ... FAILED" (serial) and "     name ... FAILED" (in a
// parallel group).
func failedTests(logPath string) []string {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return nil
	}
	var failed []string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, "... FAILED") {
			continue
		}
		f := strings.Fields(line)
		if len(f) > 1 && f[0] == "test" {
			f = f[1:]
		}
		failed = append(failed, f[0])
	}
	return failed
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// skipTests removes the named tests from a schedule file ("test: a b c"
// lines; a line left empty goes).
func skipTests(schedule string, names []string) error {
	raw, err := os.ReadFile(schedule)
	if err != nil {
		return err
	}
	drop := map[string]bool{}
	for _, n := range names {
		drop[strings.TrimSpace(n)] = true
	}
	var out []string
	found := 0
	for _, line := range strings.Split(string(raw), "\n") {
		rest, ok := strings.CutPrefix(line, "test: ")
		if !ok {
			out = append(out, line)
			continue
		}
		var kept []string
		for _, name := range strings.Fields(rest) {
			if drop[name] {
				found++
				continue
			}
			kept = append(kept, name)
		}
		if len(kept) > 0 {
			out = append(out, "test: "+strings.Join(kept, " "))
		}
	}
	if found != len(drop) {
		return fmt.Errorf("%d of the %d tests named are not in %s", len(drop)-found, len(drop), schedule)
	}
	return os.WriteFile(schedule, []byte(strings.Join(out, "\n")), 0o644)
}
