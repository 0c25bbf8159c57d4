// Package config holds the configuration specs shared by walshadow's Benthos
// components: the `walshadow` custom resource (one source session) and the
// fields the input, processor and output use to refer to it.
package config

import (
	"fmt"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// ResourceType is the top-level YAML key of walshadow's custom resource.
const ResourceType = "walshadow"

// Field names of the walshadow resource.
const (
	FieldSourceDSN       = "source_dsn"
	FieldStateDir        = "state_dir"
	FieldSlot            = "slot"
	FieldSlotName        = "name"
	FieldSlotCreate      = "create"
	FieldShadow          = "shadow"
	FieldShadowBinDir    = "bin_dir"
	FieldShadowOSUser    = "os_user"
	FieldShadowPort      = "port"
	FieldShadowBridgeDir = "bridge_library_dir"
	FieldHoldTimeout     = "hold_timeout"
	FieldStatusInterval  = "status_interval"
	FieldMaxBatchRecords = "max_batch_records"
	FieldMaxBatchAge     = "max_batch_age"
	FieldMaxPending      = "max_pending_bytes"
	FieldRetention       = "archive_retention_bytes"
	FieldSlowThreshold   = "walsender_slow_threshold_bytes"
	FieldXactBuffer      = "transaction_buffer_bytes"
	FieldSpool           = "spool"
	FieldSpoolRelease    = "release_slot"
	FieldSpoolMaxBytes   = "max_bytes"

	// FieldSession is how components name the session they belong to.
	FieldSession = "session"
)

// Session is the parsed walshadow resource.
type Session struct {
	SourceDSN       string
	StateDir        string
	SlotName        string
	CreateSlot      bool
	ShadowBinDir    string
	ShadowOSUser    string
	ShadowPort      int
	BridgeLibDir    string
	HoldTimeout     time.Duration
	StatusInterval  time.Duration
	MaxBatchRecords int
	MaxBatchAge     time.Duration
	MaxPendingBytes int64
	RetentionBytes  int64
	SlowThreshold   int64
	XactBufferBytes int64
	// SpoolRelease is what the slot may release: ReleaseDelivered or
	// ReleaseSpooled.
	SpoolRelease  string
	SpoolMaxBytes int64
}

// What the source's slot may release (spool.release_slot).
const (
	// ReleaseDelivered: the slot keeps WAL until ClickHouse acknowledged it
	// (a lost state directory can still be rebuilt from the source).
	ReleaseDelivered = "delivered"
	// ReleaseSpooled: the slot advances once WAL is durable in the spool, so
	// a slow or absent destination never costs the source disk.
	ReleaseSpooled = "spooled"
)

// SessionSpec is the config spec of the walshadow resource.
func SessionSpec() *service.ConfigSpec {
	return service.NewConfigSpec().
		Beta().
		Summary("One walshadow source session: a physical replication stream from a PostgreSQL source, the catalog-only shadow standby it feeds, and the state directory that makes it restartable.").
		Description(`
The session connects to the source with a physical replication connection
(no logical decoding), bootstraps a catalog-only shadow standby under
`+"`state_dir/shadow`"+` on first start (one BASE_BACKUP whose user relation
files are never written to disk), and feeds it the source's WAL with every
user-data record replaced by a same-length XLOG_NOOP, so the shadow's LSNs
equal the source's while its disk holds catalogs only.

The `+"`pg_physical_wal`"+` input names the session by its label.`).
		Fields(
			service.NewStringField(FieldSourceDSN).
				Description("Connection string of the source PostgreSQL (libpq URL or key=value form). The role needs the REPLICATION attribute. TLS and password/SCRAM authentication are taken from it.").
				Example("postgres://walshadow:secret@db.internal:5432/app?sslmode=verify-full").
				LintRule(`root = if this.or("") == "" { ["source_dsn must name the source PostgreSQL"] }`).
				Secret().Default(""),
			service.NewStringField(FieldStateDir).
				Description("Directory holding everything walshadow keeps between runs: the shadow data directory, the filtered WAL archive and the resume state. Never share it between sessions.").
				Example("./var/walshadow").
				LintRule(`root = if this.or("") == "" { ["state_dir must name a directory"] }`),
			service.NewObjectField(FieldSlot,
				service.NewStringField(FieldSlotName).
					Description("Physical replication slot on the source. Empty streams without a slot: the source then keeps WAL only as its wal_keep_size allows, and a long outage can lose the position.").
					Default("walshadow"),
				service.NewBoolField(FieldSlotCreate).
					Description("Create the slot (idempotently) when it does not exist.").
					Default(true),
			).Description("Replication slot settings."),
			service.NewObjectField(FieldShadow,
				service.NewStringField(FieldShadowBinDir).
					Description("Directory of the PostgreSQL server binaries of the source's major version (initdb, postgres, pg_ctl, pg_controldata).").
					Default("/usr/lib/postgresql/15/bin"),
				service.NewStringField(FieldShadowOSUser).
					Description("Operating-system user the shadow runs as when walshadow runs as root (PostgreSQL refuses to run as root).").
					Default("postgres").Advanced(),
				service.NewIntField(FieldShadowPort).
					Description("Port number of the shadow's unix socket (it listens on no TCP address).").
					Default(54329).Advanced(),
				service.NewStringField(FieldShadowBridgeDir).
					Description("Directory holding the bridge module `walshadow.so` built by `make -C pgext` (readable by the shadow's OS user). When set, the shadow preloads it and the session checks the bridge answers at start; it renders exotic types and reads catalogs as one transaction sees them. Empty: no bridge.").
					Default("").Example("./pgext"),
			).Description("The catalog-only shadow standby."),
			service.NewDurationField(FieldHoldTimeout).
				Description("Longest the shadow may take to apply a catalog boundary and the session to capture its shapes. Downstream backpressure does not count against it (the pump reads the spool at its own pace).").
				Default("30s").Advanced(),
			service.NewDurationField(FieldStatusInterval).
				Description("How often standby status (write/flush/apply positions) is sent to the source.").
				Default("10s").Advanced(),
			service.NewIntField(FieldMaxBatchRecords).
				Description("Most records in one batch emitted by the input. A backlog goes out in batches this large (each batch is one ClickHouse insert per table).").
				Default(8192).Advanced(),
			service.NewDurationField(FieldMaxBatchAge).
				Description("Longest a committed change waits for its batch to fill: under a steady load the WAL never pauses, and a batch is handed on this long after its first record, full or not (so rows are visible in ClickHouse a little after this). Lower: rows visible sooner, more (smaller) ClickHouse inserts and merges, one insert per table per batch; higher: fewer parts. docs/performance.md has the measured trade-off.").
				Default("200ms").Advanced(),
			service.NewIntField(FieldMaxPending).
				Description("Most WAL record bytes handed downstream and not yet acknowledged by the output; past it the input waits. Every record in flight is held decoded (its rows, their messages) until ClickHouse has it, about 40 times its WAL size, so this bounds the process's memory on a backlog. One batch always goes out, however large.").
				Default(2<<20).Advanced(),
			service.NewIntField(FieldRetention).
				Description("Filtered WAL kept in the archive behind the shadow's replay position, in bytes.").
				Default(256<<20).Advanced(),
			service.NewIntField(FieldSlowThreshold).
				Description("A shadow walreceiver that falls this many bytes behind is disconnected; it catches up from the archive.").
				Default(64<<20).Advanced(),
			service.NewIntField(FieldXactBuffer).
				Description("Memory for row changes of transactions still open on the source. Past it the transaction holding the most is spilled to `state_dir/spill` (CRC-framed scratch files, removed at start and as transactions end). Like PostgreSQL's logical_decoding_work_mem.").
				Default(64<<20).Advanced(),
			service.NewObjectField(FieldSpool,
				service.NewStringEnumField(FieldSpoolRelease, ReleaseDelivered, ReleaseSpooled).
					Description("What the source's replication slot may release. `delivered`: WAL the destination has not acknowledged stays on the source (a slow destination grows the source's pg_wal). `spooled`: the slot advances as soon as WAL is durable in `state_dir/spool`, so a slow or absent destination costs the source no disk; the spool then is the only copy of that WAL.").
					Default(ReleaseDelivered),
				service.NewIntField(FieldSpoolMaxBytes).
					Description("Most WAL the spool holds, in bytes. When full the replication connection stops reading (the slot then holds WAL on the source) until the readers catch up; status and the walshadow_spool_full metric say so.").
					Default(10<<30).Advanced(),
			).Description("The spool: the source's WAL as received, fsynced under `state_dir/spool` before it counts. The replication connection only appends to it; the shadow feed, the decoder and the destination read it at their own pace, and a restart resumes from it."),
		)
	// Rules sit on the fields: a custom resource's spec-level lint rule is
	// not applied by benthos.
}

// ParseSession reads a walshadow resource.
func ParseSession(conf *service.ParsedConfig) (s Session, err error) {
	get := func(fn func() error) {
		if err == nil {
			err = fn()
		}
	}
	get(func() (e error) { s.SourceDSN, e = conf.FieldString(FieldSourceDSN); return })
	get(func() (e error) { s.StateDir, e = conf.FieldString(FieldStateDir); return })
	get(func() (e error) { s.SlotName, e = conf.FieldString(FieldSlot, FieldSlotName); return })
	get(func() (e error) { s.CreateSlot, e = conf.FieldBool(FieldSlot, FieldSlotCreate); return })
	get(func() (e error) { s.ShadowBinDir, e = conf.FieldString(FieldShadow, FieldShadowBinDir); return })
	get(func() (e error) { s.ShadowOSUser, e = conf.FieldString(FieldShadow, FieldShadowOSUser); return })
	get(func() (e error) { s.ShadowPort, e = conf.FieldInt(FieldShadow, FieldShadowPort); return })
	get(func() (e error) { s.BridgeLibDir, e = conf.FieldString(FieldShadow, FieldShadowBridgeDir); return })
	get(func() (e error) { s.HoldTimeout, e = conf.FieldDuration(FieldHoldTimeout); return })
	get(func() (e error) { s.StatusInterval, e = conf.FieldDuration(FieldStatusInterval); return })
	get(func() (e error) { s.MaxBatchRecords, e = conf.FieldInt(FieldMaxBatchRecords); return })
	get(func() (e error) { s.MaxBatchAge, e = conf.FieldDuration(FieldMaxBatchAge); return })
	get(func() (e error) {
		var n int
		n, e = conf.FieldInt(FieldMaxPending)
		s.MaxPendingBytes = int64(n)
		return
	})
	get(func() (e error) {
		var n int
		n, e = conf.FieldInt(FieldRetention)
		s.RetentionBytes = int64(n)
		return
	})
	get(func() (e error) {
		var n int
		n, e = conf.FieldInt(FieldSlowThreshold)
		s.SlowThreshold = int64(n)
		return
	})
	get(func() (e error) {
		var n int
		n, e = conf.FieldInt(FieldXactBuffer)
		s.XactBufferBytes = int64(n)
		return
	})
	get(func() (e error) { s.SpoolRelease, e = conf.FieldString(FieldSpool, FieldSpoolRelease); return })
	get(func() (e error) {
		var n int
		n, e = conf.FieldInt(FieldSpool, FieldSpoolMaxBytes)
		s.SpoolMaxBytes = int64(n)
		return
	})
	if err != nil {
		return s, err
	}
	switch {
	case s.SpoolRelease != ReleaseDelivered && s.SpoolRelease != ReleaseSpooled:
		return s, fmt.Errorf("%s.%s: %q: want %s or %s", FieldSpool, FieldSpoolRelease, s.SpoolRelease, ReleaseDelivered, ReleaseSpooled)
	case s.SpoolMaxBytes < 64<<20:
		return s, fmt.Errorf("%s.%s: %d is below the 64 MiB minimum", FieldSpool, FieldSpoolMaxBytes, s.SpoolMaxBytes)
	case s.SourceDSN == "":
		return s, fmt.Errorf("%s: empty; it must name the source PostgreSQL", FieldSourceDSN)
	case s.StateDir == "":
		return s, fmt.Errorf("%s: empty; it must name a directory", FieldStateDir)
	case s.HoldTimeout <= 0:
		return s, fmt.Errorf("%s: must be positive", FieldHoldTimeout)
	case s.MaxBatchRecords <= 0:
		return s, fmt.Errorf("%s: must be positive", FieldMaxBatchRecords)
	case s.MaxBatchAge <= 0:
		return s, fmt.Errorf("%s: must be positive", FieldMaxBatchAge)
	case s.MaxPendingBytes <= 0:
		return s, fmt.Errorf("%s: must be positive", FieldMaxPending)
	case s.XactBufferBytes < 1<<20:
		return s, fmt.Errorf("%s: %d is below the 1 MiB minimum", FieldXactBuffer, s.XactBufferBytes)
	case s.ShadowPort <= 0 || s.ShadowPort > 65535:
		return s, fmt.Errorf("%s.%s: %d is not a port number", FieldShadow, FieldShadowPort, s.ShadowPort)
	}
	return s, nil
}
