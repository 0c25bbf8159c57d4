package statefile

import "path/filepath"

// The state files' names, for the packages that own them.
const (
	ManifestName = "manifest.json"
	WrittenName  = "written.json"
	LoadsName    = "loads.json"
	BaselineName = "baseline.json"
	// ShadowWALFilteredName records which bootstrap's WAL in the shadow's
	// pg_wal was filtered (session.filterShadowWAL).
	ShadowWALFilteredName = "shadow_wal_filtered"
)

// StateDir is a session's state directory (the walshadow resource's
// state_dir). Every path in it comes from here:
//
//	state_dir/
//	  manifest.json   the session's progress (session.Manifest)
//	  shadow_wal_filtered  the bootstrap whose WAL in shadow/pg_wal was filtered
//	  progress.json   its form before the manifest, read once for upgrade
//	  spool/          the source's WAL as received (internal/spool)
//	  archive/        filtered WAL segments the shadow restores from
//	  shadow/         the catalog-only shadow standby's data directory
//	  desclog/        the descriptor log (internal/desclog)
//	  clickhouse/     the clickhouse_ddl output's state (OutputDir), unless
//	                  the output names another directory
type StateDir string

func (d StateDir) join(name string) string { return filepath.Join(string(d), name) }

func (d StateDir) Manifest() string { return d.join(ManifestName) }

// ShadowWALFiltered is the marker of the filtered bootstrap WAL.
func (d StateDir) ShadowWALFiltered() string { return d.join(ShadowWALFilteredName) }
func (d StateDir) LegacyProgress() string    { return d.join("progress.json") }
func (d StateDir) Spool() string             { return d.join("spool") }
func (d StateDir) Archive() string           { return d.join("archive") }
func (d StateDir) Shadow() string            { return d.join("shadow") }
func (d StateDir) DescLog() string           { return d.join("desclog") }

// Output is the clickhouse_ddl output's default state directory.
func (d StateDir) Output() OutputDir { return OutputDir(d.join("clickhouse")) }

// OutputDir is the clickhouse_ddl output's state directory:
//
//	written.json    how far the output's writes are durable on ClickHouse
//	loads.json      the initial-load ledger (internal/load)
//	baseline.json   each relation's agreed ClickHouse table (internal/clickhouse)
//	load-spill/     a base-backup load's spilled pages (internal/load/pagewalk)
//	reload-requests/ the operator's requests to reload a table (`walshadow
//	                reload`, internal/load), one file each until picked up
type OutputDir string

func (d OutputDir) join(name string) string { return filepath.Join(string(d), name) }

func (d OutputDir) Written() string   { return d.join(WrittenName) }
func (d OutputDir) Loads() string     { return d.join(LoadsName) }
func (d OutputDir) Baseline() string  { return d.join(BaselineName) }
func (d OutputDir) LoadSpill() string { return d.join("load-spill") }

// ReloadRequests is the directory of the operator's reload requests.
func (d OutputDir) ReloadRequests() string { return d.join("reload-requests") }
