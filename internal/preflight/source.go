package preflight

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walshadow/walshadow/config"
	"github.com/walshadow/walshadow/internal/source"
)

// SourceParams is what Source checks: a walshadow session's settings plus
// the tables its output replicates.
type SourceParams struct {
	// DSN of the source. The checks use an ordinary SQL connection and a
	// replication connection (replication=true) opened from it.
	DSN string
	// Slot is the physical slot's name; "" streams without a slot.
	Slot       string
	CreateSlot bool
	// ShadowBinDir holds the PostgreSQL server binaries the shadow runs.
	ShadowBinDir string
	// ShadowOSUser runs the shadow when walshadow runs as root.
	ShadowOSUser string
	// StateDir is the session's state directory; "" skips its check.
	StateDir string
	// BridgeLibDir holds walshadow.so; "" means no bridge. A relative path
	// is relative to the current directory, as the session resolves it.
	BridgeLibDir string
	// Include and Exclude are schema.table patterns (path.Match: * and ?)
	// of the tables in scope; an empty Include means every table. Tables
	// names tables always in scope (the output's per-table settings).
	Include, Exclude, Tables []string
}

// FromSession takes the source and shadow settings of a walshadow resource;
// the caller adds the output's Include, Exclude and Tables (none: every
// table is in scope).
func FromSession(s config.Session) SourceParams {
	return SourceParams{
		DSN: s.SourceDSN, Slot: s.SlotName, CreateSlot: s.CreateSlot,
		ShadowBinDir: s.ShadowBinDir, ShadowOSUser: s.ShadowOSUser,
		StateDir: s.StateDir, BridgeLibDir: s.BridgeLibDir,
	}
}

// Supported source majors: 15, 17 and 18 are tested against real
// servers; 16 (in no Debian suite reachable here) is read by the WAL
// layout tables, which are unit-tested only.
const (
	oldestMajor    = 15
	defaultMajor   = 15 // Debian 12's: the major remedies name when the source's is unknown
	newestLayout   = 18
	connectTimeout = 10 * time.Second
)

// Source checks the source PostgreSQL, the shadow's binaries, OS user and
// state directory, and the bridge module. Every check runs; one that cannot
// (no connection) is named in the connection's Error finding.
func Source(ctx context.Context, p SourceParams) Report {
	var fs findings
	major := fs.checkSourceDatabase(ctx, p)
	fs.checkShadowBinaries(ctx, p.ShadowBinDir, major)
	osUser := fs.checkShadowOSUser(p.ShadowOSUser)
	if p.StateDir != "" {
		fs.checkStateDir(p.StateDir, osUser)
	}
	if p.BridgeLibDir != "" {
		fs.checkBridge(p.BridgeLibDir, p.ShadowBinDir, osUser)
	}
	return fs.r
}

// sourceChecks are the checks that need the SQL connection, named when it
// fails.
var sourceChecks = []string{"server_version", "wal_level", "max_wal_senders", "max_replication_slots",
	"full_page_writes", "replication_role", "slot", "replica_identity"}

// sourceSettings is what one query reads of the source's configuration.
type sourceSettings struct {
	versionNum                 int
	version                    string
	walLevel                   string
	maxWALSenders, maxSlots    int
	fullPageWrites, walKeep    string
	database, user             string
	walSendersUsed, slotsTaken int
}

// checkSourceDatabase runs the checks over SQL and the replication
// connection and returns the source's major version (0 when unknown).
func (fs *findings) checkSourceDatabase(ctx context.Context, p SourceParams) (major int) {
	target := source.RedactDSN(p.DSN)
	cfg, err := pgx.ParseConfig(p.DSN)
	if err != nil {
		fs.fail("source", fmt.Sprintf("source_dsn does not parse (%s); skipped the checks that need a connection: %s",
			scrub(err, ""), strings.Join(append(sourceChecks, "replication_connection"), ", ")),
			"fix source_dsn (a libpq URL or key=value string)")
		return 0
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = connectTimeout
	}
	delete(cfg.RuntimeParams, "replication")
	cfg.RuntimeParams["application_name"] = "walshadow-preflight"

	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		// The replication connection would fail the same way: one finding.
		fs.fail("source", fmt.Sprintf("cannot connect to the source %s: %s; skipped the checks that need it: %s",
			target, scrub(err, cfg.Password), strings.Join(append(sourceChecks, "replication_connection"), ", ")),
			"check source_dsn (host, port, user, password, database), pg_hba.conf and that the server runs")
		return 0
	}
	defer conn.Close(context.WithoutCancel(ctx))
	fs.info("source", "connected to "+target)
	major = fs.checkSourceSQL(ctx, conn, p)
	fs.checkReplicationConnection(ctx, cfg, target)
	return major
}

func (fs *findings) checkSourceSQL(ctx context.Context, conn *pgx.Conn, p SourceParams) (major int) {
	var s sourceSettings
	err := conn.QueryRow(ctx, `
SELECT current_setting('server_version_num')::int, current_setting('server_version'),
       current_setting('wal_level'), current_setting('max_wal_senders')::int,
       current_setting('max_replication_slots')::int, current_setting('full_page_writes'),
       current_setting('wal_keep_size'), current_database(), current_user,
       (SELECT count(*) FROM pg_catalog.pg_stat_get_wal_senders())::int,
       (SELECT count(*) FROM pg_catalog.pg_replication_slots)::int`).Scan(
		&s.versionNum, &s.version, &s.walLevel, &s.maxWALSenders, &s.maxSlots, &s.fullPageWrites,
		&s.walKeep, &s.database, &s.user, &s.walSendersUsed, &s.slotsTaken)
	if err != nil {
		fs.fail("source", fmt.Sprintf("reading the source's settings: %v; skipped: %s", err, strings.Join(sourceChecks, ", ")),
			"check that the source_dsn role may read pg_settings and pg_replication_slots")
		return 0
	}
	major = s.versionNum / 10000
	fs.checkVersion(s)
	fs.checkWALLevel(s)
	fs.checkWALSenders(s)
	fs.checkSlotCapacity(s, p)
	fs.info("full_page_writes", "full_page_writes = "+s.fullPageWrites)
	fs.checkRole(ctx, conn, s.user)
	fs.checkSlot(ctx, conn, p, s)
	fs.checkReplicaIdentity(ctx, conn, s.database, p)
	return major
}

func (fs *findings) checkVersion(s sourceSettings) {
	major := s.versionNum / 10000
	detail := fmt.Sprintf("source is PostgreSQL %s (server_version_num %d)", s.version, s.versionNum)
	switch {
	case major < oldestMajor:
		fs.fail("server_version", fmt.Sprintf("%s: walshadow supports PostgreSQL %d to %d", detail, oldestMajor, newestLayout),
			"upgrade the source to PostgreSQL 15 or later")
	case major > newestLayout:
		fs.fail("server_version", fmt.Sprintf("%s: walshadow supports PostgreSQL %d to %d; it cannot read this major's WAL", detail, oldestMajor, newestLayout),
			"use a walshadow release that supports this major")
	case major == 16:
		fs.warn("server_version", detail+": supported but not tested against a real server (its WAL layout is unit-tested; 15, 17 and 18 are tested end to end)",
			"report WAL decoding errors")
	default:
		fs.info("server_version", detail+": supported and tested")
	}
}

func (fs *findings) checkWALLevel(s sourceSettings) {
	const remedy = "set wal_level = logical in postgresql.conf (or ALTER SYSTEM SET wal_level = logical) and restart the source"
	switch s.walLevel {
	case "logical":
		fs.info("wal_level", "wal_level = logical")
	case "replica":
		// The physical stream and the shadow work at replica, but rows do
		// not decode: an UPDATE's new row shares a prefix/suffix with the
		// old one, a DELETE logs no old key (internal/decode/tx.go).
		fs.fail("wal_level", "wal_level is replica: the shadow could follow, but row images are incomplete (UPDATE prefix/suffix compression, no old key on DELETE) and walshadow_decode fails on them", remedy)
	default:
		fs.fail("wal_level", fmt.Sprintf("wal_level is %s: the source writes no WAL a standby can follow", s.walLevel), remedy)
	}
}

func (fs *findings) checkWALSenders(s sourceSettings) {
	free := s.maxWALSenders - s.walSendersUsed
	switch {
	case s.maxWALSenders == 0:
		fs.fail("max_wal_senders", "max_wal_senders is 0: the source accepts no replication connection",
			"set max_wal_senders to at least 1 more than the replication connections it already serves (e.g. 10) and restart the source")
	case free <= 0:
		fs.fail("max_wal_senders", fmt.Sprintf("all %d wal senders (max_wal_senders) are in use", s.maxWALSenders),
			"raise max_wal_senders and restart the source, or stop an unused replication client")
	case free == 1:
		fs.warn("max_wal_senders", fmt.Sprintf("max_wal_senders = %d, %d in use: walshadow's stream takes the last one, and an initial load in base_backup mode needs one more while it runs", s.maxWALSenders, s.walSendersUsed),
			"raise max_wal_senders by 1 before a base_backup initial load (copy loads need none)")
	default:
		fs.info("max_wal_senders", fmt.Sprintf("max_wal_senders = %d, %d in use; walshadow needs 1, and 1 more while a base_backup initial load runs", s.maxWALSenders, s.walSendersUsed))
	}
}

func (fs *findings) checkSlotCapacity(s sourceSettings, p SourceParams) {
	switch {
	case p.Slot == "":
		fs.info("max_replication_slots", "no slot configured: max_replication_slots not needed")
	case s.maxSlots == 0:
		fs.fail("max_replication_slots", fmt.Sprintf("max_replication_slots is 0 but slot %q is configured", p.Slot),
			"set max_replication_slots to at least 1 (e.g. 10) and restart the source, or set slot.name to \"\" to stream without a slot")
	default:
		fs.info("max_replication_slots", fmt.Sprintf("max_replication_slots = %d, %d taken", s.maxSlots, s.slotsTaken))
	}
}

func (fs *findings) checkRole(ctx context.Context, conn *pgx.Conn, user string) {
	var super, repl bool
	err := conn.QueryRow(ctx, "SELECT rolsuper, rolreplication FROM pg_catalog.pg_roles WHERE rolname = current_user").Scan(&super, &repl)
	switch {
	case err != nil:
		fs.fail("replication_role", fmt.Sprintf("reading the attributes of role %q: %v", user, err), "")
	case super:
		fs.info("replication_role", fmt.Sprintf("role %q is a superuser", user))
	case repl:
		fs.info("replication_role", fmt.Sprintf("role %q has REPLICATION", user))
	default:
		fs.fail("replication_role", fmt.Sprintf("role %q has neither REPLICATION nor SUPERUSER", user),
			fmt.Sprintf("ALTER ROLE %s REPLICATION (as a superuser)", pgx.Identifier{user}.Sanitize()))
	}
}

// slotName is what PostgreSQL accepts as a replication slot name.
var slotName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

func (fs *findings) checkSlot(ctx context.Context, conn *pgx.Conn, p SourceParams, s sourceSettings) {
	if p.Slot == "" {
		fs.warn("slot", fmt.Sprintf("no replication slot: the source keeps WAL only as wal_keep_size (%s) allows, and an outage longer than that loses the position", s.walKeep),
			"set slot.name (walshadow creates the slot) unless the source cannot spare the retained WAL")
		return
	}
	if !slotName.MatchString(p.Slot) {
		fs.fail("slot", fmt.Sprintf("slot name %q is invalid: PostgreSQL takes 1 to 63 of lower-case letters, digits and underscores", p.Slot),
			"rename slot.name")
		return
	}
	var (
		slotType, walStatus *string
		active              bool
		activePID           *int32
	)
	err := conn.QueryRow(ctx, "SELECT slot_type, active, active_pid, wal_status FROM pg_catalog.pg_replication_slots WHERE slot_name = $1", p.Slot).
		Scan(&slotType, &active, &activePID, &walStatus)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		switch {
		case !p.CreateSlot:
			fs.fail("slot", fmt.Sprintf("slot %q does not exist and slot.create is false", p.Slot),
				fmt.Sprintf("set slot.create: true, or create it: SELECT pg_create_physical_replication_slot('%s', true)", p.Slot))
		case s.maxSlots > 0 && s.slotsTaken >= s.maxSlots:
			fs.fail("slot", fmt.Sprintf("slot %q does not exist and cannot be created: all %d slots (max_replication_slots) are taken", p.Slot, s.maxSlots),
				"drop an unused slot or raise max_replication_slots and restart the source")
		default:
			fs.info("slot", fmt.Sprintf("slot %q does not exist; walshadow will create it", p.Slot))
		}
	case err != nil:
		fs.fail("slot", fmt.Sprintf("looking up slot %q: %v", p.Slot, err), "")
	case deref(slotType) != "physical":
		fs.fail("slot", fmt.Sprintf("slot %q is a %s slot; walshadow streams physical WAL", p.Slot, deref(slotType)),
			"choose another slot.name, or drop that slot if nothing uses it")
	case active && activePID != nil:
		fs.fail("slot", fmt.Sprintf("slot %q is in use by pid %d", p.Slot, *activePID),
			"stop the other client streaming from it (another walshadow with the same slot?) or choose another slot.name")
	case deref(walStatus) == "lost":
		fs.fail("slot", fmt.Sprintf("slot %q has lost WAL it needs (wal_status lost, past max_slot_wal_keep_size)", p.Slot),
			"drop the slot and re-bootstrap walshadow with a fresh state_dir")
	default:
		fs.info("slot", fmt.Sprintf("physical slot %q exists and is free", p.Slot))
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// checkReplicationConnection opens a replication connection and runs
// IDENTIFY_SYSTEM, as the session does first.
func (fs *findings) checkReplicationConnection(ctx context.Context, cfg *pgx.ConnConfig, target string) {
	replCfg := cfg.Config.Copy()
	replCfg.RuntimeParams["replication"] = "true"
	conn, err := pgconn.ConnectConfig(ctx, replCfg)
	if err != nil {
		fs.fail("replication_connection", fmt.Sprintf("cannot open a replication connection to %s: %s", target, scrub(err, cfg.Password)),
			"the role needs REPLICATION, pg_hba.conf a \"host replication\" line for it, and max_wal_senders a free sender")
		return
	}
	defer conn.Close(context.WithoutCancel(ctx))
	results, err := conn.Exec(ctx, "IDENTIFY_SYSTEM").ReadAll()
	if err != nil {
		fs.fail("replication_connection", fmt.Sprintf("IDENTIFY_SYSTEM on %s: %s", target, scrub(err, cfg.Password)), "")
		return
	}
	if len(results) != 1 || len(results[0].Rows) != 1 || len(results[0].Rows[0]) < 3 {
		fs.fail("replication_connection", fmt.Sprintf("IDENTIFY_SYSTEM on %s: unexpected result shape", target), "")
		return
	}
	row := results[0].Rows[0]
	fs.info("replication_connection", fmt.Sprintf("IDENTIFY_SYSTEM: system %s, timeline %s, WAL at %s", row[0], row[1], row[2]))
}

// scrub renders err without password, which pgconn never echoes: a second
// line of defence, as in internal/source.
func scrub(err error, password string) string {
	msg := err.Error()
	if len(password) >= 4 {
		msg = strings.ReplaceAll(msg, password, "xxxxx")
	}
	return msg
}
