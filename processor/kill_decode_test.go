package processor_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/rowmodel"
	"github.com/walshadow/walshadow/internal/session"
	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// Kill/restart acceptance: the pipeline runs in a child process (the test
// binary in its TestMain helper mode) that journals every batch before
// acknowledging it; the parent SIGKILLs and restarts it at seeded random
// moments while the random workload runs, then replays the journal and
// compares with the source.

const (
	// killMinKills is the least number of SIGKILLs a run makes; killing goes
	// on while the workload runs.
	killMinKills = 6
	// killLoadDuration is how long the workload runs
	// (WALSHADOW_KILL_LOAD_SECONDS overrides).
	killLoadDuration = 60 * time.Second
	// killChunkOps and killChunkPause pace the workload: the generator alone
	// does ~600 ops/s, so it runs in chunks with pauses to spread over the
	// kill window while the pipeline's backlog (and the runtime) stays
	// bounded.
	killChunkOps   = 800
	killChunkPause = 3 * time.Second
	// killStallTimeout fails the wait for the marker early when the journal
	// stops growing: a wedged pipeline retries forever without exiting.
	killStallTimeout = time.Minute
)

// killDelayKind is how long a child lives before its kill.
type killDelayKind int

const (
	killSoon killDelayKind = iota // within 0.2 s of its start: mid-startup
	killMid                       // 0.3–3 s: while it catches up
	killLate                      // 3–10 s: while it streams the live load
)

func (k killDelayKind) String() string {
	return [...]string{"soon", "mid", "late"}[k]
}

func (k killDelayKind) delay(r *rand.Rand) time.Duration {
	switch k {
	case killSoon:
		return time.Duration(r.Int63n(int64(200 * time.Millisecond)))
	case killMid:
		return 300*time.Millisecond + time.Duration(r.Int63n(int64(2700*time.Millisecond)))
	}
	return 3*time.Second + time.Duration(r.Int63n(int64(7*time.Second)))
}

// killSchedule returns the delay kind of kill i: the first killMinKills
// are a seeded shuffle holding at least two of each kind, the rest random.
func killSchedule(r *rand.Rand) func(i int) killDelayKind {
	first := []killDelayKind{killSoon, killSoon, killMid, killMid, killLate, killLate}
	r.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
	// The first run has lived through the bootstrap already: a "soon" kill
	// of it would not be soon after a start.
	for first[0] == killSoon {
		j := 1 + r.Intn(len(first)-1)
		first[0], first[j] = first[j], first[0]
	}
	return func(i int) killDelayKind {
		if i < len(first) {
			return first[i]
		}
		return killDelayKind(r.Intn(3))
	}
}

// helperProcess is one run of the child pipeline.
type helperProcess struct {
	run     int
	cmd     *exec.Cmd
	logPath string
	started time.Time
	done    chan struct{}
}

// helperRunner starts runs of the child pipeline, all journaling to one file.
type helperRunner struct {
	dir, config, journal string
}

func (h *helperRunner) start(run int) (*helperProcess, error) {
	logPath := filepath.Join(h.dir, fmt.Sprintf("run-%02d.log", run))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating the log of run %d: %w", run, err)
	}
	cmd := exec.Command(os.Args[0]) // TestMain runs the helper pipeline
	cmd.Env = append(os.Environ(), "WALSHADOW_HELPER_CONFIG="+h.config, "WALSHADOW_HELPER_JOURNAL="+h.journal)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting run %d: %w", run, err)
	}
	p := &helperProcess{run: run, cmd: cmd, logPath: logPath, started: time.Now(), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		cmd.Wait()
		logFile.Close()
	}()
	return p, nil
}

func (p *helperProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *helperProcess) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// logTail is the end of the run's output, for failure messages.
func (p *helperProcess) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return fmt.Sprintf("run %d (%s):\n%s", p.run, p.cmd.ProcessState, b)
}

// killRecord is what the test saw at one kill.
type killRecord struct {
	run          int // the run that was killed
	kind         killDelayKind
	lived        time.Duration
	progress     progressState
	journalBytes int64 // journal size after the kill (torn tail cut)
	tornBytes    int64
}

// progressState is the part of state_dir/manifest.json the test checks.
type progressState struct {
	resume, delivered wal.LSN
}

// readProgress reads manifest.json; before the session first saved it
// (a kill right after the bootstrap) both LSNs are zero: a restart starts
// where the bootstrap left off and nothing counts as delivered.
func readProgress(stateDir string) (progressState, error) {
	m, err := session.ReadManifest(stateDir)
	if err != nil || m == nil {
		return progressState{}, err
	}
	return progressState{resume: m.Restart, delivered: m.Delivered}, nil
}

// cutTornTail truncates the journal after its last newline: SIGKILL can
// land inside a large write(2) and leave half a line, which the next run
// would append to. That half line belonged to a batch never acknowledged.
// It returns the size after the cut and the bytes cut.
func cutTornTail(path string) (size, torn int64, err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("opening journal %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("stat journal %s: %w", path, err)
	}
	end := st.Size()
	const chunk = 64 << 10
	buf := make([]byte, chunk)
	for pos := end; pos > 0; {
		n := int64(chunk)
		if pos < n {
			n = pos
		}
		pos -= n
		if _, err := f.ReadAt(buf[:n], pos); err != nil {
			return 0, 0, fmt.Errorf("reading journal %s: %w", path, err)
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			keep := pos + int64(i) + 1
			if keep == end {
				return end, 0, nil
			}
			if err := f.Truncate(keep); err != nil {
				return 0, 0, fmt.Errorf("truncating journal %s: %w", path, err)
			}
			return keep, end - keep, f.Sync()
		}
	}
	if end > 0 {
		if err := f.Truncate(0); err != nil {
			return 0, 0, fmt.Errorf("truncating journal %s: %w", path, err)
		}
	}
	return 0, end, nil
}

// journalEntry is one journal message with the byte offset of its line.
type journalEntry struct {
	offset int64
	msg    rowmodel.Message
}

// readJournalFrom decodes the complete lines of the journal from offset on
// and returns them and the offset after the last complete line.
func readJournalFrom(path string, offset int64) ([]journalEntry, int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, offset, nil
	}
	if err != nil {
		return nil, offset, fmt.Errorf("opening journal %s: %w", path, err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, offset, fmt.Errorf("seeking journal %s: %w", path, err)
	}
	r := bufio.NewReaderSize(f, 1<<20)
	var out []journalEntry
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return out, offset, nil // a torn or still-growing tail waits
		}
		if err != nil {
			return nil, offset, fmt.Errorf("reading journal %s: %w", path, err)
		}
		msg, err := rowmodel.DecodeJournalLine(line)
		if err != nil {
			return nil, offset, fmt.Errorf("journal %s at byte %d: %w", path, offset, err)
		}
		out = append(out, journalEntry{offset: offset, msg: msg})
		offset += int64(len(line))
	}
}

// messageIdentity names a message so its repetition by a later run is
// recognised: relation, record LSN, operation (event for schema messages)
// and the row's key (the whole row under REPLICA IDENTITY FULL).
func messageIdentity(msg rowmodel.Message) (string, error) {
	m := msg.Meta
	id := m[rowmodel.MetaRelationOid] + "|" + m[rowmodel.MetaLSN] + "|" + m[rowmodel.MetaOperation]
	switch m[rowmodel.MetaOperation] {
	case rowmodel.OpSchema:
		return id + "|" + m[rowmodel.MetaEvent], nil
	case rowmodel.OpTruncate:
		return id, nil
	}
	keyed := msg.Payload
	if names := m[rowmodel.MetaKey]; names != "" {
		keyed = map[string]any{}
		for _, n := range strings.Split(names, ",") {
			keyed[n] = msg.Payload[n]
		}
	}
	b, err := rowmodel.EncodeJournalLine(rowmodel.Message{Payload: keyed})
	if err != nil {
		return "", fmt.Errorf("encoding the key of %s: %w", id, err)
	}
	return id + "|" + string(b), nil
}

// waitJournalMarker polls the journal until the marker row's insert is in it.
func waitJournalMarker(t *testing.T, journal, stateDir, token string, child *helperProcess, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var offset int64
	lastGrowth := time.Now()
	for {
		entries, next, err := readJournalFrom(journal, offset)
		if err != nil {
			t.Fatal(err)
		}
		if next != offset {
			lastGrowth = time.Now()
		}
		offset = next
		for _, e := range entries {
			if e.msg.Meta[rowmodel.MetaTable] == "rl_marker" && e.msg.Meta[rowmodel.MetaOperation] == rowmodel.OpInsert && e.msg.Payload["token"] == token {
				return
			}
		}
		if child.exited() {
			t.Fatalf("the pipeline exited before the marker arrived:\n%s", child.logTail())
		}
		if time.Since(lastGrowth) > killStallTimeout {
			prog, err := readProgress(stateDir)
			t.Fatalf("the pipeline stalled: the journal did not grow for %v and the marker is not in it (manifest.json: restart_lsn %s delivered_lsn %s %v)\n%s",
				killStallTimeout, prog.resume, prog.delivered, err, child.logTail())
		}
		if time.Now().After(deadline) {
			t.Fatalf("the marker row was not in the journal within %v\n%s", timeout, child.logTail())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitStreaming waits until the first run bootstrapped the shadow and
// streams from the slot: kills before that would test a re-bootstrap.
func waitStreaming(t *testing.T, src *testrig.Postgres, stateDir, slot string, child *helperProcess) {
	t.Helper()
	marker := filepath.Join(stateDir, "shadow", "walshadow.bootstrap_complete")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(marker); err == nil &&
			src.QueryInt(t, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND active", slot) == 1 {
			return
		}
		if child.exited() {
			t.Fatalf("the pipeline exited before streaming:\n%s", child.logTail())
		}
		if time.Now().After(deadline) {
			t.Fatalf("not streaming from slot %s after 2 minutes\n%s", slot, child.logTail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// killer SIGKILLs and restarts the child pipeline on a seeded schedule until
// the workload is done and at least killMinKills kills happened.
type killer struct {
	runner   *helperRunner
	stateDir string
	rng      *rand.Rand
	schedule func(int) killDelayKind
	logf     func(format string, args ...any)

	mu      sync.Mutex
	current *helperProcess
	kills   []killRecord
	err     error
}

func (k *killer) child() *helperProcess {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.current
}

// loop kills until loadDone is closed and killMinKills kills happened, or
// until stop is closed (the test is ending early).
func (k *killer) loop(loadDone, stop <-chan struct{}) {
	loopStart := time.Now()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-loadDone:
			if i >= killMinKills {
				return
			}
		default:
		}
		kind := k.schedule(i)
		delay := kind.delay(k.rng)
		p := k.child()
		// The first run has been up since the bootstrap: its delay counts
		// from the start of the workload.
		from := p.started
		if i == 0 {
			from = loopStart
		}
		if wait := delay - time.Since(from); wait > 0 {
			select {
			case <-time.After(wait):
			case <-stop:
				return
			case <-p.done:
				k.fail(fmt.Errorf("the pipeline exited on its own:\n%s", p.logTail()))
				return
			}
		}
		if p.exited() {
			k.fail(fmt.Errorf("the pipeline exited on its own:\n%s", p.logTail()))
			return
		}
		p.kill()
		rec := killRecord{run: p.run, kind: kind, lived: time.Since(p.started)}
		var err error
		if rec.progress, err = readProgress(k.stateDir); err != nil {
			k.fail(err)
			return
		}
		if rec.journalBytes, rec.tornBytes, err = cutTornTail(k.runner.journal); err != nil {
			k.fail(err)
			return
		}
		k.logf("kill %d (%s) of run %d after %v: manifest.json restart_lsn %s delivered_lsn %s; journal %d bytes (%d torn bytes cut)",
			i+1, kind, p.run, rec.lived.Round(time.Millisecond), rec.progress.resume, rec.progress.delivered, rec.journalBytes, rec.tornBytes)
		next, err := k.runner.start(p.run + 1)
		k.mu.Lock()
		k.kills = append(k.kills, rec)
		if err == nil {
			k.current = next
		}
		k.mu.Unlock()
		if err != nil {
			k.fail(err)
			return
		}
	}
}

func (k *killer) fail(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.err = err
}

// runPacedLoad runs the random workload (DDL and two-phase commit on) for
// about d: chunks of killChunkOps operations with pauses between them, each
// chunk on a fresh set of >= 10 tables in its own schema (the workload
// tracks its DDL only within one RunRandomLoad call, so a second call on
// the same tables would fail most statements on renamed columns).
func runPacedLoad(t *testing.T, src *testrig.Postgres, seed int64, d time.Duration) {
	t.Helper()
	start := time.Now()
	defer src.Exec(t, "ALTER DATABASE postgres RESET search_path")
	for chunk := 0; chunk == 0 || time.Since(start) < d; chunk++ {
		if chunk > 0 {
			time.Sleep(killChunkPause)
		}
		schema := fmt.Sprintf("kill_%d", chunk)
		// Sessions opened from now on (CreateRandomSchema's, the
		// workload's) create and find the chunk's tables and types there.
		src.Exec(t, fmt.Sprintf("CREATE SCHEMA %s; ALTER DATABASE postgres SET search_path TO %s", schema, schema))
		opt := testrig.RandomLoadOptions{Seed: seed*1000 + int64(chunk), Tables: 12, Ops: killChunkOps, Clients: 3, DDL: true, TwoPhase: true}
		src.CreateRandomSchema(t, opt)
		stats := src.RunRandomLoad(t, opt)
		t.Logf("load chunk %d (schema %s, seed %d) at %v: %v", chunk, schema, opt.Seed, time.Since(start).Round(time.Millisecond), stats)
	}
}

func modTime(fi os.FileInfo) any {
	if fi == nil {
		return nil
	}
	return fi.ModTime()
}

// checkReplaysOnlyUndelivered checks every restart: a message the new run
// emitted that an earlier run had already journaled belongs to a
// transaction committed after the delivered LSN read at the kill before the
// run, and its record is at or above the resume floor read then. Runs are
// told apart by the journal's size at each kill.
func checkReplaysOnlyUndelivered(t *testing.T, entries []journalEntry, kills []killRecord) {
	t.Helper()
	seen := map[string]bool{}
	var summary []string
	i := 0
	for run := 0; run <= len(kills); run++ {
		end := int64(-1) // the final run: to the end of the journal
		if run < len(kills) {
			end = kills[run].journalBytes
		}
		var msgs, dups, violations int
		var newIDs []string
		minDupLSN, maxDupCommit := wal.LSN(0), wal.LSN(0)
		for ; i < len(entries) && (end < 0 || entries[i].offset < end); i++ {
			msgs++
			e := entries[i]
			id, err := messageIdentity(e.msg)
			if err != nil {
				t.Fatal(err)
			}
			if !seen[id] {
				newIDs = append(newIDs, id)
				continue
			}
			dups++
			before := kills[run-1] // run 0 has nothing to repeat
			lsn, err1 := wal.ParseLSN(e.msg.Meta[rowmodel.MetaLSN])
			commit, err2 := wal.ParseLSN(e.msg.Meta[rowmodel.MetaCommitLSN])
			if err := errors.Join(err1, err2); err != nil {
				t.Errorf("run %d, journal byte %d: %v", run, e.offset, err)
				continue
			}
			if minDupLSN == 0 || lsn < minDupLSN {
				minDupLSN = lsn
			}
			maxDupCommit = max(maxDupCommit, commit)
			if commit <= before.progress.delivered || lsn < before.progress.resume {
				if violations++; violations <= 10 {
					t.Errorf("run %d repeated %s (journal byte %d, commit %s) although manifest.json at the kill before it said restart_lsn %s, delivered_lsn %s: meta %v",
						run, id, e.offset, commit, before.progress.resume, before.progress.delivered, e.msg.Meta)
				}
			}
		}
		for _, id := range newIDs {
			seen[id] = true
		}
		line := fmt.Sprintf("run %d: journaled %d messages", run, msgs)
		if run > 0 {
			line += fmt.Sprintf(", %d repeated", dups)
			if dups > 0 {
				line += fmt.Sprintf(" (lowest record %s, highest commit %s)", minDupLSN, maxDupCommit)
			}
		}
		if violations > 0 {
			line += fmt.Sprintf(", %d BELOW THE FLOOR OR ALREADY DELIVERED", violations)
		}
		if run < len(kills) {
			k := kills[run]
			line += fmt.Sprintf("; killed (%s) after %v: restart_lsn %s delivered_lsn %s, %d torn journal bytes cut",
				k.kind, k.lived.Round(time.Millisecond), k.progress.resume, k.progress.delivered, k.tornBytes)
		} else {
			line += "; final run, stopped after the marker"
		}
		summary = append(summary, line)
	}
	kinds := map[killDelayKind]int{}
	for _, k := range kills {
		kinds[k.kind]++
	}
	t.Logf("%d kills (soon=%d mid=%d late=%d):\n  %s", len(kills), kinds[killSoon], kinds[killMid], kinds[killLate], strings.Join(summary, "\n  "))
	if len(kills) < killMinKills {
		t.Errorf("only %d kills, want at least %d", len(kills), killMinKills)
	}
	if !sort.SliceIsSorted(kills, func(a, b int) bool { return kills[a].journalBytes < kills[b].journalBytes }) {
		t.Errorf("journal sizes at the kills are not monotone: %v", kills)
	}
}

func TestCutTornTail(t *testing.T) {
	for _, tc := range []struct {
		name, content, want string
	}{
		{"empty", "", ""},
		{"whole lines", "a\nbb\n", "a\nbb\n"},
		{"torn tail", "a\nbb\nccc", "a\nbb\n"},
		{"only a torn line", "ccc", ""},
		{"torn tail longer than a read chunk", "a\n" + strings.Repeat("x", 200<<10), "a\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal")
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			size, torn, err := cutTornTail(path)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			if string(got) != tc.want || size != int64(len(tc.want)) || torn != int64(len(tc.content)-len(tc.want)) {
				t.Errorf("got %q (size %d, torn %d), want %q", got, size, torn, tc.want)
			}
		})
	}
	if size, torn, err := cutTornTail(filepath.Join(t.TempDir(), "missing")); err != nil || size != 0 || torn != 0 {
		t.Errorf("missing journal: %d %d %v", size, torn, err)
	}
}

func TestMessageIdentity(t *testing.T) {
	row := func(op, key string, payload map[string]any) rowmodel.Message {
		return rowmodel.Message{Meta: map[string]string{
			rowmodel.MetaOperation: op, rowmodel.MetaRelationOid: "16400", rowmodel.MetaLSN: "0/3000100", rowmodel.MetaKey: key,
		}, Payload: payload}
	}
	id := func(m rowmodel.Message) string {
		s, err := messageIdentity(m)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// A multi-insert: one LSN, rows told apart by key.
	if id(row("insert", "id", map[string]any{"id": int64(1), "v": "a"})) == id(row("insert", "id", map[string]any{"id": int64(2), "v": "a"})) {
		t.Error("rows with different keys at one LSN share an identity")
	}
	// Only the key counts under a key; the whole row under FULL.
	if id(row("update", "id", map[string]any{"id": int64(1), "v": "a"})) != id(row("update", "id", map[string]any{"id": int64(1), "v": "b"})) {
		t.Error("the same keyed row differs by a non-key column")
	}
	if id(row("insert", "", map[string]any{"v": "a"})) == id(row("insert", "", map[string]any{"v": "b"})) {
		t.Error("REPLICA IDENTITY FULL rows with different values share an identity")
	}
	// The two halves of a key-changing update differ by operation.
	if id(row("delete", "id", map[string]any{"id": int64(1)})) == id(row("update", "id", map[string]any{"id": int64(1)})) {
		t.Error("a delete and an update of one key at one LSN share an identity")
	}
}
