package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/urfave/cli/v2"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/load"
	"github.com/walshadow/walshadow/internal/session"
	"github.com/walshadow/walshadow/internal/shadow"
	"github.com/walshadow/walshadow/internal/source"
	"github.com/walshadow/walshadow/internal/spool"
	"github.com/walshadow/walshadow/internal/statefile"
	"github.com/walshadow/walshadow/internal/wal"
	"github.com/walshadow/walshadow/output"
)

const (
	flagStateDir  = "state-dir"
	flagSourceDSN = "source-dsn"
	flagSlot      = "slot"
	flagLabel     = "label"
	flagCHState   = "clickhouse-state-dir"

	defaultSlotName = "walshadow"
	// statusSourceTimeout bounds the connection and queries to the source:
	// status is for looking, it must not hang on an unreachable server.
	statusSourceTimeout = 10 * time.Second
)

// statusTarget is what `walshadow status` inspects.
type statusTarget struct {
	StateDir string
	// SourceDSN, when set, adds the source's WAL position and slot.
	SourceDSN string
	// SlotName is the session's physical slot; "" streams without one.
	SlotName string
	// ClickHouseStateDir holds written.json; "" means StateDir/clickhouse.
	ClickHouseStateDir string
	// SpoolMaxBytes and SpoolRelease are the session's spool settings (0,
	// "": not known, no config given).
	SpoolMaxBytes int64
	SpoolRelease  string
	// Clusters are the config's clickhouse_ddl outputs that name a
	// cluster (NODES); ClustersErr: the outputs could not be read.
	Clusters    []clusterTarget
	ClustersErr error
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "Show a session's durable progress, its shadow and its lag",
		ArgsUsage: "[config.yaml] (flags go before it)",
		Description: `Reads the session's state directory (the manifest, the shadow's bootstrap
marker and postmaster.pid, the ClickHouse output's written.json) and prints
every position with its age and the lags between them. With a source DSN it
also asks the source for its current WAL position and the replication
slot's state, and prints how far each position is behind the source.
With a clickhouse_ddl output that names a cluster it lists the cluster's
nodes (NODES): each one's version, macros, replication queue and delay for
the output's database, or why it does not answer.
Nothing is written, and the running session is not disturbed.

The state directory, source DSN and slot come from the pipeline config
(its walshadow resource, ${ENV} variables interpolated) or from the flags;
a flag wins over the config. Passwords are never printed.

Exit status: 0 when the state directory was read, 1 when it holds no
manifest (the session has not started yet) or the manifest is corrupt.

Examples:
  walshadow status resources/pipelines/pg_to_clickhouse.yaml
  walshadow status --state-dir ./var/walshadow --source-dsn postgres://walshadow@db/app`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: flagStateDir, Usage: "the session's state_dir (instead of, or overriding, the config's)"},
			&cli.StringFlag{Name: flagSourceDSN, Usage: "the source's connection string, to show its WAL position and slot"},
			&cli.StringFlag{Name: flagSlot, Usage: "the physical replication slot (default: the config's slot.name, else " + defaultSlotName + ")"},
			&cli.StringFlag{Name: flagLabel, Usage: "which walshadow resource of the config, when it has several"},
			&cli.StringFlag{Name: flagCHState, Usage: "the clickhouse_ddl output's state_dir, when it sets one (default: clickhouse under the state directory)"},
		},
		Action: runStatus,
	}
}

func runStatus(c *cli.Context) error {
	target, err := statusTargetOf(c)
	if err != nil {
		return cli.Exit("status: "+err.Error(), exitFatal)
	}
	ctx, cancel := context.WithTimeout(c.Context, statusSourceTimeout)
	defer cancel()
	rep, err := collectStatus(ctx, target, time.Now())
	if err != nil {
		return cli.Exit("status: "+err.Error(), exitFatal)
	}
	if err := rep.write(c.App.Writer); err != nil {
		return cli.Exit(fmt.Sprintf("status: writing the report: %v", err), exitFatal)
	}
	return nil
}

// statusTargetOf combines the config file (if given) with the flags.
func statusTargetOf(c *cli.Context) (statusTarget, error) {
	var t statusTarget
	switch c.NArg() {
	case 0:
	case 1:
		ps, err := readPipelineSession(c.Args().First(), c.String(flagLabel))
		if err != nil {
			return t, err
		}
		t = statusTarget{StateDir: ps.StateDir, SourceDSN: ps.SourceDSN, SlotName: ps.SlotName,
			SpoolMaxBytes: ps.SpoolMaxBytes, SpoolRelease: ps.SpoolRelease}
		t.Clusters, t.ClustersErr = clusterTargets(c.Args().First(), ps.Label)
	default:
		return t, fmt.Errorf("give one pipeline config, not %d arguments", c.NArg())
	}
	if c.IsSet(flagStateDir) {
		t.StateDir = c.String(flagStateDir)
	}
	if c.IsSet(flagSourceDSN) {
		t.SourceDSN = c.String(flagSourceDSN)
	}
	t.ClickHouseStateDir = c.String(flagCHState)
	switch {
	case c.IsSet(flagSlot):
		t.SlotName = c.String(flagSlot)
	case c.NArg() == 0:
		t.SlotName = defaultSlotName
	}
	if t.StateDir == "" {
		return t, fmt.Errorf("no state directory: give a pipeline config or --%s", flagStateDir)
	}
	return t, nil
}

// statusReport is everything status found.
type statusReport struct {
	now      time.Time
	stateDir string
	manifest *session.Manifest

	shadow shadowStatus

	writtenPath string
	written     wal.LSN
	writtenAt   time.Time
	writtenErr  error // a missing file is not an error: written stays 0

	src *sourceStatus // nil without a source DSN

	loads    []load.Entry // the output's initial loads
	loadsErr error
	// reloads are the reloads of followed tables by reason (the ledger's).
	reloads map[string]int64
	// requests are the operator's reload requests not yet picked up.
	requests    []load.ReloadRequest
	requestsErr error
	// left: relations whose ClickHouse tables no longer follow them
	// (they left the output's scope).
	left    []*clickhouse.Agreed
	leftErr error

	spool        spool.State
	spoolFound   bool
	spoolErr     error
	spoolMax     int64
	spoolRelease string

	clusters    []clusterStatus // the NODES of each cluster output
	clustersErr error
}

type shadowStatus struct {
	dir          string
	bootstrap    *shadow.BootstrapResult
	bootstrapErr error
	pid          int
	running      bool
	pidNote      string // why running is what it is
	size         int64
	sizeErr      error
}

type sourceStatus struct {
	target   string // redacted
	err      error  // connecting or the WAL position failed
	wal      wal.LSN
	standby  bool
	systemID uint64
	sysIDErr error

	slot     string
	slotErr  error
	slotSeen bool
	slotType string
	restart  *wal.LSN
	active   bool
	walState string
}

// collectStatus reads the state directory and, with a DSN, the source. An
// error is a state directory status cannot report on: no manifest, or a
// corrupt one.
func collectStatus(ctx context.Context, t statusTarget, now time.Time) (*statusReport, error) {
	m, err := session.ReadManifest(t.StateDir)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("%s holds no %s: the session has not started yet (or state_dir names another directory)", t.StateDir, session.ManifestFile)
	}
	rep := &statusReport{now: now, stateDir: t.StateDir, manifest: m, spoolMax: t.SpoolMaxBytes, spoolRelease: t.SpoolRelease,
		clustersErr: t.ClustersErr}
	clusters := startClusterStatus(ctx, t.Clusters)
	dir := statefile.StateDir(t.StateDir)
	rep.shadow = readShadowStatus(dir.Shadow())
	rep.spool, rep.spoolFound, rep.spoolErr = spool.ReadState(dir.Spool())
	chDir := statefile.OutputDir(t.ClickHouseStateDir)
	if chDir == "" {
		chDir = dir.Output()
	}
	rep.writtenPath = chDir.Written()
	rep.written, rep.writtenAt, rep.writtenErr = output.ReadWritten(chDir)
	if ledger, err := load.ReadLedger(string(chDir)); err != nil {
		rep.loadsErr = err
	} else {
		rep.loads = ledger.All()
		rep.reloads = ledger.Reloads()
	}
	var bad map[string]error
	rep.requests, bad, rep.requestsErr = load.ReloadRequests(chDir)
	for path, err := range bad {
		rep.requestsErr = errors.Join(rep.requestsErr, fmt.Errorf("%s: %w", path, err))
	}
	if agreed, err := clickhouse.ReadAgreed(string(chDir)); err != nil {
		rep.leftErr = err
	} else {
		for _, a := range agreed {
			if a.Left && !a.Dropped {
				rep.left = append(rep.left, a)
			}
		}
	}
	if t.SourceDSN != "" {
		rep.src = querySource(ctx, t.SourceDSN, t.SlotName)
	}
	rep.clusters = clusters()
	return rep, nil
}

func readShadowStatus(dir string) shadowStatus {
	s := shadowStatus{dir: dir}
	s.bootstrap, s.bootstrapErr = shadow.ReadBootstrapResult(dir)
	s.pid, s.running, s.pidNote = postmasterState(dir)
	s.size, s.sizeErr = diskUsage(dir)
	return s
}

// postmasterState reads postmaster.pid (its first line is the postmaster's
// pid) and checks that process exists.
func postmasterState(dir string) (pid int, running bool, note string) {
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, "no postmaster.pid"
	}
	if err != nil {
		return 0, false, fmt.Sprintf("unknown: %v", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err = strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0, false, fmt.Sprintf("unknown: postmaster.pid starts with %q, not a pid", first)
	}
	switch err := syscall.Kill(pid, 0); {
	case err == nil:
		return pid, true, ""
	case errors.Is(err, syscall.EPERM):
		// It exists but belongs to another user (the shadow runs as its
		// own OS user when walshadow runs as root).
		return pid, true, "owned by another user"
	case errors.Is(err, syscall.ESRCH):
		return pid, false, "stale postmaster.pid: no such process"
	default:
		return pid, false, fmt.Sprintf("unknown: signalling pid %d: %v", pid, err)
	}
}

// diskUsage sums the sizes of the regular files under dir; unreadable parts
// are skipped and reported.
func diskUsage(dir string) (int64, error) {
	var total int64
	var errs []error
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == dir {
				return err
			}
			errs = append(errs, err)
			return nil
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				errs = append(errs, err)
				return nil
			}
			total += info.Size()
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if len(errs) > 0 {
		return total, fmt.Errorf("%d unreadable entries, the first: %w", len(errs), errs[0])
	}
	return total, nil
}

// querySource asks the source for its WAL position, identity and slot over
// an ordinary SQL connection (no walsender is taken). Errors are kept in the
// result: the state directory's report stands without them.
func querySource(ctx context.Context, dsn, slot string) *sourceStatus {
	s := &sourceStatus{target: source.RedactDSN(dsn), slot: slot}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// pgconn's parse error can quote the string, password included.
		s.err = errors.New("the connection string does not parse")
		return s
	}
	delete(cfg.RuntimeParams, "replication")
	cfg.RuntimeParams["application_name"] = "walshadow status"
	scrub := func(err error) error {
		if err == nil || len(cfg.Password) < 4 {
			return err
		}
		return errors.New(strings.ReplaceAll(err.Error(), cfg.Password, "xxxxx"))
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		s.err = scrub(fmt.Errorf("connecting: %w", err))
		return s
	}
	defer conn.Close(context.Background())

	var lsnText *string
	err = conn.QueryRow(ctx, `SELECT pg_is_in_recovery(),
		(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_receive_lsn() ELSE pg_current_wal_lsn() END)::text`).
		Scan(&s.standby, &lsnText)
	switch {
	case err != nil:
		s.err = scrub(fmt.Errorf("reading the current WAL position: %w", err))
		return s
	case lsnText == nil:
		s.err = errors.New("the source is a standby that has received no WAL yet")
		return s
	}
	if s.wal, err = wal.ParseLSN(*lsnText); err != nil {
		s.err = fmt.Errorf("the source's WAL position %q: %w", *lsnText, err)
		return s
	}
	var sysID int64
	if err := conn.QueryRow(ctx, "SELECT system_identifier FROM pg_control_system()").Scan(&sysID); err != nil {
		s.sysIDErr = scrub(err)
	} else {
		s.systemID = uint64(sysID)
	}
	if slot != "" {
		var restart, walState *string
		err := conn.QueryRow(ctx, `SELECT slot_type, restart_lsn::text, active, wal_status
			FROM pg_catalog.pg_replication_slots WHERE slot_name = $1`, slot).
			Scan(&s.slotType, &restart, &s.active, &walState)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			s.slotErr = scrub(fmt.Errorf("reading pg_replication_slots: %w", err))
		default:
			s.slotSeen = true
			if walState != nil {
				s.walState = *walState
			}
			if restart != nil {
				lsn, err := wal.ParseLSN(*restart)
				if err != nil {
					s.slotErr = fmt.Errorf("slot %q: restart_lsn %q: %w", slot, *restart, err)
				} else {
					s.restart = &lsn
				}
			}
		}
	}
	return s
}

// write prints the report as aligned tables.
func (r *statusReport) write(out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	m := r.manifest
	age := ago(r.now, m.UpdatedAt)
	fmt.Fprintf(w, "state directory\t%s\n", r.stateDir)
	fmt.Fprintf(w, "source identity\tsystem %d, timeline %d, server_version_num %d, WAL segments of %s\n",
		m.SystemID, m.Timeline, m.ServerVersionNum, byteSize(int64(m.WALSegmentSize)))
	fmt.Fprintf(w, "manifest\tupdated %s (%s)\n", age, m.UpdatedAt.UTC().Format(time.RFC3339))
	fmt.Fprintln(w)

	fmt.Fprintln(w, "POSITION\tLSN\tAS OF")
	for _, p := range []struct {
		name string
		lsn  wal.LSN
	}{
		{"received", m.Received},
		{"filtered durable", m.FilteredDurable},
		{"shadow replay", m.ShadowReplay},
		{"delivered", m.Delivered},
		{"floor", m.Floor},
		{"restart", m.Restart},
	} {
		fmt.Fprintf(w, "%s\t%s\tupdated %s\n", p.name, p.lsn, age)
	}
	switch {
	case r.writtenErr != nil:
		fmt.Fprintf(w, "clickhouse written\t?\t%v\n", r.writtenErr)
	case r.written == 0:
		fmt.Fprintf(w, "clickhouse written\t-\tno %s (no clickhouse_ddl output, or nothing written yet)\n", r.writtenPath)
	default:
		fmt.Fprintf(w, "clickhouse written\t%s\tupdated %s (%s)\n", r.written, ago(r.now, r.writtenAt), r.writtenPath)
	}
	switch {
	case r.spoolErr != nil:
		fmt.Fprintf(w, "spool\t?\t%v\n", r.spoolErr)
	case r.spoolFound:
		detail := fmt.Sprintf("from %s: %d segment files, %s", r.spool.Start, r.spool.Segments, byteSize(r.spool.Bytes))
		if r.spoolMax > 0 {
			detail += fmt.Sprintf(" of max_bytes %s", byteSize(r.spoolMax))
			if r.spool.Bytes >= r.spoolMax {
				detail += ": FULL, the replication connection is not reading (the source's slot holds the WAL) until the pipeline catches up"
			}
		}
		if r.spoolRelease != "" {
			detail += "; release_slot " + r.spoolRelease
		}
		fmt.Fprintf(w, "spooled (durable)\t%s\t%s\n", r.spool.End, detail)
	}
	if s := r.src; s != nil && s.err == nil {
		fmt.Fprintf(w, "source WAL\t%s\tnow\n", s.wal)
		if s.restart != nil {
			fmt.Fprintf(w, "slot restart\t%s\tnow\n", *s.restart)
		}
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "LAG\tBEHIND")
	fmt.Fprintf(w, "received → shadow replay\t%s\n", lag(m.Received, m.ShadowReplay))
	fmt.Fprintf(w, "received → delivered\t%s\n", lag(m.Received, m.Delivered))
	if r.written != 0 {
		fmt.Fprintf(w, "received → clickhouse written\t%s\n", lag(m.Received, r.written))
	}
	if s := r.src; s != nil && s.err == nil {
		fmt.Fprintf(w, "source → received\t%s\n", lag(s.wal, m.Received))
		fmt.Fprintf(w, "source → shadow replay\t%s\n", lag(s.wal, m.ShadowReplay))
		fmt.Fprintf(w, "source → delivered\t%s\n", lag(s.wal, m.Delivered))
		if r.written != 0 {
			fmt.Fprintf(w, "source → clickhouse written\t%s\n", lag(s.wal, r.written))
		}
		if s.restart != nil {
			fmt.Fprintf(w, "WAL the slot retains\t%s\n", lag(s.wal, *s.restart))
		}
	}
	fmt.Fprintln(w)

	sh := r.shadow
	fmt.Fprintf(w, "SHADOW\t%s\n", sh.dir)
	switch b := sh.bootstrap; {
	case b != nil:
		fmt.Fprintf(w, "bootstrap\tcomplete: backup %s to %s, timeline %d, system %d\n", b.StartLSN, b.EndLSN, b.Timeline, b.SystemID)
		if b.SystemID != m.SystemID {
			fmt.Fprintf(w, "\tWARNING: the manifest's system is %d\n", m.SystemID)
		}
	case errors.Is(sh.bootstrapErr, shadow.ErrNotBootstrapped):
		fmt.Fprintf(w, "bootstrap\tnot bootstrapped\n")
	default:
		fmt.Fprintf(w, "bootstrap\t%v\n", sh.bootstrapErr)
	}
	switch {
	case sh.running && sh.pidNote != "":
		fmt.Fprintf(w, "postmaster\trunning, pid %d (%s)\n", sh.pid, sh.pidNote)
	case sh.running:
		fmt.Fprintf(w, "postmaster\trunning, pid %d\n", sh.pid)
	default:
		fmt.Fprintf(w, "postmaster\tnot running (%s)\n", sh.pidNote)
	}
	switch {
	case errors.Is(sh.sizeErr, fs.ErrNotExist) && sh.size == 0:
		fmt.Fprintf(w, "size on disk\tnone (no shadow directory)\n")
	case sh.sizeErr != nil && sh.size == 0:
		fmt.Fprintf(w, "size on disk\tunknown: %v\n", sh.sizeErr)
	case sh.sizeErr != nil:
		fmt.Fprintf(w, "size on disk\tat least %s (%v)\n", byteSize(sh.size), sh.sizeErr)
	default:
		fmt.Fprintf(w, "size on disk\t%s\n", byteSize(sh.size))
	}

	r.writeFailed(w)
	r.writeRequests(w)
	r.writeLoads(w)
	r.writeReloads(w)
	r.writeLeft(w)
	r.writeNodes(w)

	if s := r.src; s != nil {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "SOURCE\t%s\n", s.target)
		if s.err != nil {
			fmt.Fprintf(w, "error\t%v\n", s.err)
		} else {
			role := "primary"
			if s.standby {
				role = "standby (position: WAL received)"
			}
			fmt.Fprintf(w, "current WAL\t%s, %s\n", s.wal, role)
			switch {
			case s.sysIDErr != nil:
				fmt.Fprintf(w, "system\tunknown: %v\n", s.sysIDErr)
			case s.systemID != m.SystemID:
				fmt.Fprintf(w, "system\t%d: WARNING: not the manifest's system %d (the DSN names another server)\n", s.systemID, m.SystemID)
			default:
				fmt.Fprintf(w, "system\t%d, as in the manifest\n", s.systemID)
			}
			switch {
			case s.slot == "":
				fmt.Fprintf(w, "slot\tnone configured\n")
			case s.slotErr != nil:
				fmt.Fprintf(w, "slot\t%s: %v\n", s.slot, s.slotErr)
			case !s.slotSeen:
				fmt.Fprintf(w, "slot\t%s: does not exist on the source\n", s.slot)
			default:
				state := "inactive"
				if s.active {
					state = "active"
				}
				restart := "none"
				if s.restart != nil {
					restart = s.restart.String()
				}
				walState := s.walState
				if walState == "" {
					walState = "-"
				}
				fmt.Fprintf(w, "slot\t%s: %s %s, restart_lsn %s, wal_status %s\n", s.slot, s.slotType, state, restart, walState)
			}
		}
	}
	return w.Flush()
}

// writeLoads lists the initial loads of the ledger.
func (r *statusReport) writeLoads(w io.Writer) {
	if r.loadsErr == nil && len(r.loads) == 0 {
		return
	}
	fmt.Fprintln(w)
	if r.loadsErr != nil {
		fmt.Fprintf(w, "INITIAL LOADS\t%v\n", r.loadsErr)
		return
	}
	done := 0
	for _, e := range r.loads {
		if e.Phase == load.PhaseDone {
			done++
		}
	}
	fmt.Fprintf(w, "INITIAL LOADS\t%d of %d done\n", done, len(r.loads))
	for _, e := range r.loads {
		line := fmt.Sprintf("%s, %s", e.Mode, e.Phase)
		if e.Coverage != 0 {
			line += ", rows tagged _lsn " + e.Coverage.String()
		}
		switch {
		case e.Phase == load.PhaseDone:
			line += fmt.Sprintf(": %d rows, %s in %s", e.Rows, byteSize(e.Bytes), roundDuration(e.FinishedAt.Sub(e.StartedAt)))
		case !e.StartedAt.IsZero():
			line += fmt.Sprintf(": attempt %d, started %s", e.Attempt, ago(r.now, e.StartedAt))
		}
		if e.Loads > 1 {
			line += fmt.Sprintf("; %d loads of it in all", e.Loads)
		}
		if e.Parked != nil {
			line += "; PARKED (see FAILED)"
		}
		if e.Reason != "" {
			line += "; loaded again: " + e.Reason
		}
		if e.LastError != "" {
			line += "; last error: " + e.LastError
		}
		fmt.Fprintf(w, "%s\t%s\n", relName(e.Schema, e.Table), cell(line))
	}
}

// writeReloads counts the reloads of followed tables by reason.
func (r *statusReport) writeReloads(w io.Writer) {
	var total int64
	for _, n := range r.reloads {
		total += n
	}
	if total == 0 {
		return
	}
	fmt.Fprintf(w, "\nRELOADS\t%d of followed tables, by reason (each a copy of the table from the source; walshadow_table_reloads_total)\n", total)
	reasons := append([]string(nil), load.ReloadReasons...)
	for k := range r.reloads {
		if !slices.Contains(reasons, k) {
			reasons = append(reasons, k)
		}
	}
	for _, k := range reasons {
		if n := r.reloads[k]; n > 0 {
			fmt.Fprintf(w, "%s\t%d\n", k, n)
		}
	}
}

// writeRequests lists the reload requests the output has not picked up
// yet (it looks every few seconds while it runs, and at its start).
func (r *statusReport) writeRequests(w io.Writer) {
	if r.requestsErr != nil {
		fmt.Fprintf(w, "\nRELOAD REQUESTED\t%v\n", r.requestsErr)
	}
	if len(r.requests) == 0 {
		return
	}
	if r.requestsErr == nil {
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "RELOAD REQUESTED\t%d table(s): the running walshadow reloads each within seconds (or at its next start)\n", len(r.requests))
	for _, q := range r.requests {
		fmt.Fprintf(w, "%s\trequested %s (%s)\n", cell(q.Table), ago(r.now, q.At), q.At.Format(time.RFC3339))
	}
}

// writeFailed lists the tables that failed and are not repaired yet: a
// reload is filling their table, or they are parked; their changes are
// not written meanwhile.
func (r *statusReport) writeFailed(w io.Writer) {
	var failed []load.Entry
	parked := 0
	for _, e := range r.loads {
		switch {
		case e.Parked != nil && e.Phase == load.PhaseLoading:
			parked++
			failed = append(failed, e)
		case e.FailedAt != 0 && e.Phase != load.PhaseDone:
			failed = append(failed, e)
		}
	}
	if len(failed) == 0 {
		return
	}
	switch {
	case parked == 0:
		fmt.Fprintf(w, "\nFAILED\t%d table(s) could not take a change: each is being reloaded (see INITIAL LOADS), its changes written again once the reload is published\n", len(failed))
	default:
		fmt.Fprintf(w, "\nFAILED\t%d table(s) could not take a change, %d of them PARKED: the same failure came again after a reload, so a parked table is neither loaded nor written until its shape, its configuration or the ClickHouse server changes, or `walshadow reload <config.yaml> <schema.table>` asks for it; the others are being reloaded\n", len(failed), parked)
	}
	for _, e := range failed {
		p := e.Parked
		if p == nil {
			fmt.Fprintf(w, "%s\tstate failed, reloading (%s, %s): %s\n", relName(e.Schema, e.Table), e.Mode, e.Phase, cell(e.Reason))
			continue
		}
		at := "during its load"
		if p.At != 0 {
			at = "at " + p.At.String()
		}
		fmt.Fprintf(w, "%s\tstate failed, PARKED %s (since %s, the same failure %d times, %d loads of it): %s\n",
			relName(e.Schema, e.Table), at, ago(r.now, p.Since), p.Count, e.Loads, cell(p.Reason))
		if p.Remedy != "" {
			fmt.Fprintf(w, "\tremedy: %s\n", cell(p.Remedy))
		}
	}
}

// writeLeft lists the tables that no longer follow their relations.
func (r *statusReport) writeLeft(w io.Writer) {
	if r.leftErr != nil {
		fmt.Fprintf(w, "\nNOT FOLLOWED\t%v\n", r.leftErr)
		return
	}
	if len(r.left) == 0 {
		return
	}
	fmt.Fprintf(w, "\nNOT FOLLOWED\t%d table(s) left the scope: they keep their rows, no longer follow the source, and are loaded again if it returns\n", len(r.left))
	for _, a := range r.left {
		fmt.Fprintf(w, "%s\t%s (oid %d)\n", relName(a.Schema, a.Table), cell(clickhouse.QuoteQualified(a.Target)), a.Oid)
	}
}

// relName is schema.table as one cell of the report (cell).
func relName(schema, table string) string { return cell(schema + "." + table) }

// cell is s as one cell of the report: a name or an error may hold any
// character PostgreSQL accepts in an identifier, and a tab or a line
// break in it would shift the columns or start a line of its own, so
// control characters are written as Go escapes (\t, \n, \x7f).
func cell(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// lag is how far behind `to` is `from`, in bytes.
func lag(from, to wal.LSN) string {
	if to > from {
		return fmt.Sprintf("0 B (ahead by %s)", byteSize(int64(to-from)))
	}
	return byteSize(int64(from - to))
}

// byteSize renders n bytes for people, exact below 1 KiB.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n), ""
	for _, s := range []string{"KiB", "MiB", "GiB", "TiB", "PiB"} {
		v /= unit
		suffix = s
		if v < unit {
			break
		}
	}
	return fmt.Sprintf("%.1f %s (%d B)", v, suffix, n)
}

// ago renders the time since t: "3 s ago", "2 min 5 s ago", "4 h 12 min ago".
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "at an unknown time"
	}
	d := now.Sub(t)
	if d < 0 {
		return fmt.Sprintf("%s in the future (clock skew?)", roundDuration(-d))
	}
	return roundDuration(d) + " ago"
}

func roundDuration(d time.Duration) string {
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%d s", s)
	case s < 3600:
		return fmt.Sprintf("%d min %d s", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%d h %d min", s/3600, s%3600/60)
	default:
		return fmt.Sprintf("%d d %d h", s/86400, s%86400/3600)
	}
}
