package shadow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/walshadow/walshadow/internal/fsutil"
)

// DefaultBinDir is where Debian's postgresql-15 package puts the binaries.
const DefaultBinDir = "/usr/lib/postgresql/15/bin"

// ShadowConfig describes how the shadow runs. Materialize turns it into the
// data directory's configuration files at every boot.
type ShadowConfig struct {
	// Dir is the shadow's data directory, made by Bootstrap.
	Dir string
	// OSUser owns the directory and runs the server (see BootstrapConfig).
	OSUser string
	// BinDir holds pg_ctl, postgres and pg_controldata; default DefaultBinDir.
	BinDir string
	// Port names the server's unix socket (.s.PGSQL.<port>); the shadow
	// listens on no TCP address. Default 5432.
	Port int
	// SocketDir is unix_socket_directories; default Dir.
	SocketDir string
	// PrimarySocketDir and PrimaryPort reach walshadow's walsender, the
	// shadow's primary. An empty PrimarySocketDir writes no primary_conninfo:
	// the shadow then only replays what restore_command and pg_wal give it.
	PrimarySocketDir string
	PrimaryPort      int
	// PrimaryUser is the role the walreceiver presents; empty lets libpq use
	// the OS user's name.
	PrimaryUser string
	// RestoreCommand is restore_command (e.g. "cp /state/archive/%f %p").
	RestoreCommand string
	// PreloadLibraries is shared_preload_libraries, for the bridge module.
	PreloadLibraries []string
	// ExtraSettings are further postgresql.conf parameters (the bridge's
	// walshadow.* settings, shared_buffers, ...). Parameters walshadow
	// manages (hot_standby, the GUC floors, primary_conninfo, ...) are
	// refused.
	ExtraSettings map[string]string
	// User and Database are what local SQL connections (ReplayLSN, Query)
	// use; User defaults to the bootstrap superuser, Database to postgres.
	User     string
	Database string
	// LogFile receives the server's log; default <Dir>/log/walshadow_shadow.log.
	LogFile string
	// StartTimeout bounds pg_ctl -w start (replay to a consistent state
	// included); default 5 minutes.
	StartTimeout time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// bridgeWorkers is the extra background worker the bridge module of the next
// issue registers; max_worker_processes leaves room for it.
const bridgeWorkers = 1

// managedSettings are written by Materialize; ExtraSettings may not set them
// because the shadow's correctness depends on their values.
var managedSettings = map[string]bool{
	"hot_standby": true, "wal_level": true, "fsync": true, "full_page_writes": true,
	"listen_addresses": true, "unix_socket_directories": true, "port": true,
	"max_connections": true, "max_worker_processes": true, "max_wal_senders": true,
	"max_prepared_transactions": true, "max_locks_per_transaction": true,
	"primary_conninfo": true, "restore_command": true, "recovery_target_timeline": true,
	"shared_preload_libraries": true, "allow_in_place_tablespaces": true,
	"data_directory": true, "hba_file": true, "ident_file": true, "config_file": true,
	"include": true, "include_if_exists": true, "include_dir": true,
	"primary_slot_name": true, "recovery_target": true, "recovery_target_lsn": true,
	"recovery_target_name": true, "recovery_target_time": true, "recovery_target_xid": true,
	"recovery_target_action": true, "archive_mode": true,
}

var settingNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// maxSocketPath is sizeof(sockaddr_un.sun_path) minus the terminating NUL.
const maxSocketPath = 107

// resolved is a validated ShadowConfig with defaults applied.
type resolved struct {
	ShadowConfig
	owner *osUser
	log   *slog.Logger
}

func (c ShadowConfig) resolve() (*resolved, error) {
	if c.Dir == "" {
		return nil, errors.New("shadow: Dir is empty")
	}
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return nil, fmt.Errorf("shadow: %w", err)
	}
	c.Dir = dir
	if c.BinDir == "" {
		c.BinDir = DefaultBinDir
	}
	if c.Port == 0 {
		c.Port = 5432
	}
	if c.Port < 1 || c.Port > 65535 {
		return nil, fmt.Errorf("shadow: port %d out of range", c.Port)
	}
	if c.SocketDir == "" {
		c.SocketDir = dir
	}
	if !filepath.IsAbs(c.SocketDir) {
		return nil, fmt.Errorf("shadow: socket directory %q is not absolute", c.SocketDir)
	}
	if sock := socketPath(c.SocketDir, c.Port); len(sock) > maxSocketPath {
		return nil, fmt.Errorf("shadow: socket path %s is %d bytes, over the %d unix sockets allow: choose a shorter socket directory",
			sock, len(sock), maxSocketPath)
	}
	if c.PrimarySocketDir != "" && (c.PrimaryPort < 1 || c.PrimaryPort > 65535) {
		return nil, fmt.Errorf("shadow: walsender port %d out of range", c.PrimaryPort)
	}
	if c.Database == "" {
		c.Database = "postgres"
	}
	if c.LogFile == "" {
		c.LogFile = filepath.Join(dir, "log", "walshadow_shadow.log")
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 5 * time.Minute
	}
	for k := range c.ExtraSettings {
		if !settingNamePattern.MatchString(k) {
			return nil, fmt.Errorf("shadow: extra setting %q is not a parameter name", k)
		}
		if managedSettings[strings.ToLower(k)] {
			return nil, fmt.Errorf("shadow: extra setting %q is managed by walshadow", k)
		}
	}
	for _, lib := range c.PreloadLibraries {
		if lib == "" || strings.ContainsAny(lib, ",\"") {
			return nil, fmt.Errorf("shadow: preload library %q is not a plain library name", lib)
		}
	}
	owner, err := lookupOSUser(c.OSUser)
	if err != nil {
		return nil, fmt.Errorf("shadow: %w", err)
	}
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	return &resolved{ShadowConfig: c, owner: owner, log: log}, nil
}

func socketPath(dir string, port int) string {
	return filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(port))
}

// Materialize writes the shadow's configuration: postgresql.conf rewritten
// entirely (the backup's own may even live elsewhere, as on Debian), an
// empty postgresql.auto.conf and pg_ident.conf, a pg_hba.conf that trusts
// local connections only, and standby.signal. The GUC floors come from the
// shadow's pg_control; they are returned.
func Materialize(ctx context.Context, cfg ShadowConfig) (Floors, error) {
	r, err := cfg.resolve()
	if err != nil {
		return Floors{}, err
	}
	return r.materialize(ctx)
}

func (r *resolved) materialize(ctx context.Context) (Floors, error) {
	cd, err := readControlData(ctx, r.owner, r.BinDir, r.Dir)
	if err != nil {
		return Floors{}, err
	}
	conf, err := renderPostgresqlConf(r.ShadowConfig, cd.Floors)
	if err != nil {
		return Floors{}, err
	}
	files := []struct{ name, content string }{
		{"postgresql.conf", conf},
		{"postgresql.auto.conf", ""},
		{"pg_hba.conf", hbaConf},
		{"pg_ident.conf", ""},
		{"standby.signal", ""},
	}
	for _, f := range files {
		if err := fsutil.WriteFileAtomic(filepath.Join(r.Dir, f.name), []byte(f.content), 0o600, r.owner.chown); err != nil {
			return Floors{}, fmt.Errorf("materializing the shadow's configuration: %w", err)
		}
	}
	// recovery.signal would let the shadow promote itself when the archive
	// runs dry; it must stay a standby.
	if err := os.Remove(filepath.Join(r.Dir, "recovery.signal")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return Floors{}, fmt.Errorf("removing recovery.signal: %w", err)
	}
	return cd.Floors, nil
}

// hbaConf trusts local (unix socket) connections and nothing else: the
// shadow listens on no TCP address, and the socket directory is owner-only.
const hbaConf = `# Written by walshadow at every start.
# TYPE  DATABASE     USER  METHOD
local   all          all   trust
local   replication  all   trust
`

// renderPostgresqlConf is the whole postgresql.conf of the shadow.
func renderPostgresqlConf(c ShadowConfig, f Floors) (string, error) {
	type kv struct{ k, v string }
	settings := []kv{
		{"hot_standby", "on"},
		{"wal_level", "replica"},
		{"autovacuum", "off"},
		{"fsync", "on"},
		{"full_page_writes", "on"},
		{"listen_addresses", ""},
		{"unix_socket_directories", c.SocketDir},
		{"port", strconv.Itoa(c.Port)},
		{"shared_buffers", "32MB"},
		{"max_connections", strconv.Itoa(f.MaxConnections)},
		{"max_worker_processes", strconv.Itoa(f.MaxWorkerProcesses + bridgeWorkers)},
		{"max_wal_senders", strconv.Itoa(f.MaxWALSenders)},
		{"max_prepared_transactions", strconv.Itoa(f.MaxPreparedTransactions)},
		{"max_locks_per_transaction", strconv.Itoa(f.MaxLocksPerTransaction)},
	}
	if c.PrimarySocketDir != "" {
		settings = append(settings, kv{"primary_conninfo", primaryConnInfo(c)})
	}
	settings = append(settings,
		kv{"restore_command", c.RestoreCommand},
		kv{"recovery_target_timeline", "latest"},
		// Tablespaces arrive as plain directories under pg_tblspc (never
		// links to the source's locations); recovery refuses those unless
		// this is on.
		kv{"allow_in_place_tablespaces", "on"},
		kv{"shared_preload_libraries", strings.Join(c.PreloadLibraries, ",")},
		kv{"cluster_name", "walshadow_shadow"},
		kv{"logging_collector", "off"},
		kv{"lc_messages", "C"},
	)
	keys := make([]string, 0, len(c.ExtraSettings))
	for k := range c.ExtraSettings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		settings = append(settings, kv{k, c.ExtraSettings[k]})
	}
	var b strings.Builder
	b.WriteString("# Written by walshadow at every start of the shadow; edits are lost.\n")
	for _, s := range settings {
		q, err := quoteSetting(s.v)
		if err != nil {
			return "", fmt.Errorf("shadow setting %s: %w", s.k, err)
		}
		fmt.Fprintf(&b, "%s = %s\n", s.k, q)
	}
	return b.String(), nil
}

// quoteSetting quotes a postgresql.conf value: inside single quotes the
// configuration parser takes ” and backslash escapes.
func quoteSetting(v string) (string, error) {
	if strings.ContainsAny(v, "\x00\n\r") {
		return "", errors.New("value contains a NUL or line break")
	}
	v = strings.ReplaceAll(v, `\`, `\\`)
	return "'" + strings.ReplaceAll(v, "'", "''") + "'", nil
}

// primaryConnInfo is the libpq connection string to walshadow's walsender.
func primaryConnInfo(c ShadowConfig) string {
	parts := []string{
		"host=" + quoteConnValue(c.PrimarySocketDir),
		"port=" + strconv.Itoa(c.PrimaryPort),
		"application_name=walshadow_shadow",
	}
	if c.PrimaryUser != "" {
		parts = append(parts, "user="+quoteConnValue(c.PrimaryUser))
	}
	return strings.Join(parts, " ")
}

// quoteConnValue quotes a libpq keyword value: single quotes, with
// backslash escaping quotes and backslashes.
func quoteConnValue(v string) string {
	v = strings.ReplaceAll(v, `\`, `\\`)
	return "'" + strings.ReplaceAll(v, "'", `\'`) + "'"
}
