// Package session runs one walshadow source session: the physical
// replication stream from the source, the filter, the catalog-only shadow
// standby fed through walshadow's own walsender and a filtered-segment
// archive, and the publication hold at catalog boundaries. The
// pg_physical_wal input reads its batches; later components (the decode
// processor) take part in its holds.
//
// State directory layout:
//
//	state_dir/
//	  manifest.json   identity and the LSNs that matter (see ManifestFile)
//	  shadow/         the shadow's data directory (owned by the shadow's OS user)
//	  archive/        filtered WAL segments, the shadow's restore_command source
//	  desclog/        the descriptor log (desc_log.ckpt, desc_log.tail)
//	  spool/          the source's WAL as received (see package spool)
//	  run/            the walsender's and the bridge's unix sockets
package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/config"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/filter"
	"github.com/walshadow/walshadow/internal/preflight"
	"github.com/walshadow/walshadow/internal/shadow"
	"github.com/walshadow/walshadow/internal/source"
	"github.com/walshadow/walshadow/internal/spool"
	"github.com/walshadow/walshadow/internal/statefile"
	"github.com/walshadow/walshadow/internal/wal"
	"github.com/walshadow/walshadow/internal/xact"
)

// ErrClosed is returned by Next once the session has been closed.
var ErrClosed = errors.New("walshadow session closed")

// Session is one source session. Start is idempotent; Next hands out
// batches in WAL order; Ack marks a batch delivered downstream.
type Session struct {
	cfg config.Session
	log *slog.Logger
	m   *sessionMetrics

	// SelfRelease: release each boundary as soon as the shadow has applied
	// it and the session has captured its shapes. Tests turn it off to
	// observe holds and release them with CaptureAndRelease.
	SelfRelease bool

	startMu sync.Mutex
	running bool
	fatal   error // sticky: a session that failed this way never restarts
	// preflighted: the start-up checks passed once in this process.
	preflighted bool
	cancel      context.CancelFunc
	done        chan struct{}

	batches  chan *Batch
	closedCh chan struct{} // closed by Close

	mu      sync.Mutex
	reader  any      // the input reading the session (Attach)
	pending []*Batch // handed out by Next, not acknowledged yet, in order
	// acksCh is closed (and forgotten) when pending's head moves or the
	// run changes: AwaitEarlier's wake-up.
	acksCh   chan struct{}
	closed   bool
	runErr   error
	parts    *parts
	startLSN wal.LSN
	// saved is the manifest last written, savedAt when.
	saved      Manifest
	savedAt    time.Time
	compacting atomic.Bool
	// lag dates the source's WAL end; sourceEnd is the newest seen; the
	// catch-up log reports progress towards catchUpTarget.
	lag           lagClock
	sourceEnd     wal.LSN
	catchUpTarget wal.LSN
	catchUpLogged time.Time

	// nextMu serialises Next with the reorderer's teardown.
	nextMu sync.Mutex
	// captureMu serialises boundary captures.
	captureMu sync.Mutex
	// seq numbers output batches; reorderFloor is the reorderer's floor as
	// of its last Next; delivered is the commit LSN through which every
	// transaction has been acknowledged downstream (a restart skips them).
	seq          uint64
	epoch        uint64
	reorderFloor wal.LSN
	delivered    wal.LSN
	xactSnap     xactSnapshot // the reorderer's state as of its last Next
	// reorderIdle: the reorderer held nothing ready as of its last
	// consume, having consumed the pump's records before reorderConsumed.
	reorderIdle     bool
	reorderConsumed wal.LSN

	// spoolSuspect: the last run could not read the spool's copy as WAL;
	// the next start empties the spool (under mu). spoolFull: the receive
	// loop stopped reading because the spool is full.
	spoolSuspect bool
	spoolFull    atomic.Bool
	flushSent    wal.LSN // the flush position last sent early (receive loop only)
}

// parts are the running pieces, set by Start.
type parts struct {
	stream     *source.Stream
	spool      *spool.Spool
	walsender  *source.Walsender
	archive    *source.Archive
	shadow     *shadow.Shadow
	pump       *Pump
	filter     *filter.Filter
	desclog    *desclog.Log
	bridge     *shadow.Bridge
	followedDB string
	// captureConn is the captures' connection to the shadow's followed
	// database, kept between boundaries (a backend started per capture
	// cost more than the capture), under the session's captureMu.
	captureConn *pgx.Conn
	identity    source.Identity
	segSize     uint32
	boot        *shadow.BootstrapResult
	reorder     *reorderer
}

// New returns a session that starts on the first Start.
func New(cfg config.Session, logger *service.Logger, metrics *service.Metrics) *Session {
	return &Session{
		cfg:         cfg,
		log:         slog.New(newBenthosHandler(logger)),
		m:           newSessionMetrics(metrics),
		SelfRelease: true,
		batches:     make(chan *Batch, 4),
		closedCh:    make(chan struct{}),
	}
}

// Dirs of the state directory.
func (s *Session) shadowDir() string  { return statefile.StateDir(s.cfg.StateDir).Shadow() }
func (s *Session) archiveDir() string { return statefile.StateDir(s.cfg.StateDir).Archive() }
func (s *Session) runDir() string     { return filepath.Join(s.cfg.StateDir, "run") }
func (s *Session) spillDir() string   { return filepath.Join(s.cfg.StateDir, "spill") }

// Start brings the session up: bootstrap or resume the shadow, open the
// archive and the walsender, start the shadow, connect to the source and
// run the pump. A failure that a retry cannot fix (another source, a lost
// resume point, a corrupt state file) is returned again by every later call.
func (s *Session) Start(ctx context.Context) error {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	if s.fatal != nil {
		return s.fatal
	}
	s.mu.Lock()
	closed, runErr := s.closed, s.runErr
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if s.running && runErr == nil {
		return nil
	}
	if s.running {
		s.stopLocked()
	}
	if err := s.start(ctx); err != nil {
		s.stopLocked()
		if IsPermanent(err) {
			s.fatal = err
		}
		return err
	}
	s.running = true
	return nil
}

// ErrReattached stops a run whose reader was replaced (a config reload):
// the replaced reader's Next returns it (wrapped in ErrStopped).
var ErrReattached = errors.New("a new input reads the session (the pipeline's config was reloaded)")

// Attach records the input reading the session. A different input than
// the one before (a config reload rebuilt the pipeline, keeping this
// resource) stops the current run, so the next Start resumes from the
// durable state: the batches the old pipeline held are not coming back.
func (s *Session) Attach(reader any) {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	s.mu.Lock()
	prev := s.reader
	s.reader = reader
	stale := prev != nil && prev != reader && s.running && s.runErr == nil
	if stale {
		s.runErr = ErrReattached
	}
	s.mu.Unlock()
	if stale {
		s.log.Info("the pipeline was rebuilt: the session resumes from its durable state")
		if s.cancel != nil {
			s.cancel()
		}
	}
}

// preflight checks everything the session needs of the source, the
// shadow's binaries and the bridge module, and reports every problem at
// once. Problems a retry can outlast (the source unreachable, the slot held
// by the walsender of a process that just died) are logged and left to the
// stream, which retries them; the rest stop the start for good.
func (s *Session) preflight(ctx context.Context) error {
	rep := preflight.Source(ctx, preflight.FromSession(s.cfg))
	var fatal preflight.Report
	for _, f := range rep {
		switch {
		case f.Severity == preflight.Info:
			s.log.Info("preflight " + f.Check + ": " + f.Detail)
		case f.Severity == preflight.Warning,
			f.Check == "source" || f.Check == "slot" || f.Check == "replication_connection":
			s.log.Warn("preflight "+f.Check+": "+f.Detail, "remedy", f.Remedy)
		default:
			fatal = append(fatal, f)
		}
	}
	if err := fatal.Err(); err != nil {
		return fmt.Errorf("%w: %w", errPreflight, err)
	}
	return nil
}

// errPreflight marks a start stopped by preflight findings.
var errPreflight = errors.New("the source or the shadow is not ready for walshadow")

// IsPermanent tells errors a restart cannot cure: another source, a lost
// resume point, corrupt state. The user has to act.
func IsPermanent(err error) bool {
	var idErr *source.IdentityMismatchError
	var walErr *source.WALRemovedError
	return errors.As(err, &idErr) || errors.As(err, &walErr) || errors.Is(err, errCorruptState) || errors.Is(err, errPreflight)
}

var errCorruptState = errors.New("corrupt state")

func (s *Session) start(ctx context.Context) error {
	if err := os.MkdirAll(s.cfg.StateDir, 0o711); err != nil {
		return fmt.Errorf("creating state_dir: %w", err)
	}
	if !s.preflighted {
		if err := s.preflight(ctx); err != nil {
			return err
		}
		s.preflighted = true
	}
	prog, err := ReadManifest(s.cfg.StateDir)
	if err != nil {
		return fmt.Errorf("%w: %w", errCorruptState, err)
	}
	pcfg, err := pgconn.ParseConfig(s.cfg.SourceDSN)
	if err != nil {
		return fmt.Errorf("%w: %s cannot be parsed as a PostgreSQL connection string", errCorruptState, config.FieldSourceDSN)
	}

	// 1. The shadow's data directory: bootstrapped once, resumed after.
	p := &parts{followedDB: pcfg.Database}
	boot, err := shadow.Bootstrap(ctx, shadow.BootstrapConfig{
		SourceDSN:    s.cfg.SourceDSN,
		Dir:          s.shadowDir(),
		OSUser:       s.cfg.ShadowOSUser,
		FollowedDB:   pcfg.Database,
		BinDir:       s.cfg.ShadowBinDir,
		Logger:       s.log,
		TransformWAL: nil, // filtered after the fact, see filterShadowWAL
	})
	if err != nil {
		return fmt.Errorf("bootstrapping the shadow: %w", err)
	}
	p.boot = boot
	p.segSize = uint32(boot.WALSegmentSize)
	if !boot.Resumed {
		s.log.Info("bootstrapped the catalog-only shadow", "dir", s.shadowDir(),
			"backup_start", boot.StartLSN.String(), "backup_end", boot.EndLSN.String())
	}
	// The backup window's WAL holds user records too: NOOP them before the
	// shadow replays them, so it never needs a user page. Idempotent; it
	// runs until a start has done it for this bootstrap (a crash right after
	// bootstrap is covered), which a marker then records.
	if err := s.filterBootstrapWAL(ctx, boot, p.segSize); err != nil {
		return err
	}

	// 2. Identity and where to start.
	var delivered wal.LSN
	p.identity = source.Identity{SystemID: boot.SystemID, Timeline: boot.Timeline}
	start := boot.WALEnd
	if prog != nil {
		stored := source.Identity{SystemID: prog.SystemID, Timeline: prog.Timeline}
		if err := source.CheckIdentity(p.identity, stored); err != nil {
			return fmt.Errorf("%w: state_dir %s: the shadow (%s) and %s (%s) name different sources: restore the state directory from one backup, or start with a fresh state_dir",
				errCorruptState, s.cfg.StateDir, p.identity, ManifestFile, stored)
		}
		start = prog.Restart
		delivered = prog.Delivered
	}
	start -= start % wal.LSN(p.segSize)
	// The source must still be the one the state was built from: checked
	// before the shadow starts, so a wrong source_dsn changes nothing.
	if err := s.checkSourceIdentity(ctx, p.identity); err != nil {
		return err
	}

	// 3. Archive and walsender.
	// The shadow reads the archive through its OS user's primary group.
	u, err := user.Lookup(s.cfg.ShadowOSUser)
	if err != nil {
		return fmt.Errorf("%s.%s: %w", config.FieldShadow, config.FieldShadowOSUser, err)
	}
	if p.archive, err = source.OpenArchive(source.ArchiveConfig{Dir: s.archiveDir(), SegmentSize: p.segSize, ReaderGroup: u.Gid}); err != nil {
		return err
	}
	// A damaged segment would stop the shadow's replay silently (it waits
	// for a record that never reads back): refuse it here, by name.
	if err := p.archive.Verify(0, start); err != nil {
		return fmt.Errorf("%w: %w", errCorruptState, err)
	}
	p.walsender, err = source.NewWalsender(source.WalsenderConfig{
		SocketDir:     s.runDir(),
		Port:          s.cfg.ShadowPort,
		SocketOwner:   s.cfg.ShadowOSUser,
		SystemID:      boot.SystemID,
		Timeline:      boot.Timeline,
		SegmentSize:   p.segSize,
		PGVersionNum:  boot.ServerVersionNum,
		Archive:       p.archive,
		SlowThreshold: int(s.cfg.SlowThreshold),
		Logger:        s.log,
	})
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	done := make(chan struct{})
	s.done = done
	var wg sync.WaitGroup
	// done closes once every goroutine started here has returned, whether
	// the start completes or fails part way (stopLocked waits for it).
	defer func() {
		go func() {
			wg.Wait()
			close(done)
		}()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := p.walsender.Serve(runCtx); err != nil && runCtx.Err() == nil {
			s.failRun(fmt.Errorf("walsender for the shadow: %w", err))
		}
	}()

	// 4. The shadow, fed by the walsender, backed by the archive, with the
	// bridge module preloaded when configured.
	shcfg := shadow.ShadowConfig{
		Dir:              s.shadowDir(),
		OSUser:           s.cfg.ShadowOSUser,
		BinDir:           s.cfg.ShadowBinDir,
		Port:             s.cfg.ShadowPort,
		PrimarySocketDir: s.runDir(),
		PrimaryPort:      s.cfg.ShadowPort,
		RestoreCommand:   p.archive.RestoreCommand(),
		Logger:           s.log,
	}
	if s.cfg.BridgeLibDir != "" {
		libDir, err := filepath.Abs(s.cfg.BridgeLibDir)
		if err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(libDir, shadow.BridgeLibrary+".so")); err != nil {
			return fmt.Errorf("%s.%s: %w (build it with make -C pgext)", config.FieldShadow, config.FieldShadowBridgeDir, err)
		}
		shcfg.PreloadLibraries, shcfg.ExtraSettings = shadow.BridgeSettings(s.bridgeSocket(), pcfg.Database, libDir)
	}
	p.shadow, err = shadow.New(shcfg)
	if err != nil {
		return err
	}
	s.setParts(p)
	if err := s.openDescLog(p); err != nil {
		return err
	}
	if err := p.shadow.Start(ctx); err != nil {
		return fmt.Errorf("starting the shadow: %w", err)
	}
	if s.cfg.BridgeLibDir != "" {
		if err := s.dialBridge(ctx, p); err != nil {
			return err
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := p.shadow.Supervise(runCtx); err != nil && runCtx.Err() == nil {
			s.failRun(fmt.Errorf("supervising the shadow: %w", err))
		}
	}()

	// 5. The descriptor log: seeded once while the shadow
	// stands still, before the pump feeds it.
	if err := s.seedDescLog(ctx, p, start); err != nil {
		return err
	}

	// 6. The spool, and the source stream appending to it from its end.
	streamFrom, err := s.openSpool(p, start)
	if err != nil {
		return err
	}
	if s.cfg.SlotName == "" {
		s.log.Warn("streaming without a replication slot: the source keeps WAL only as wal_keep_size allows, and a long outage can lose the resume point")
	}
	p.stream, err = source.OpenStream(ctx, source.StreamConfig{
		DSN:            s.cfg.SourceDSN,
		Slot:           s.cfg.SlotName,
		CreateSlot:     s.cfg.CreateSlot,
		Identity:       &p.identity,
		StatusInterval: s.cfg.StatusInterval,
		Logger:         s.log,
	}, streamFrom)
	if err != nil {
		return fmt.Errorf("opening the source stream at %s: %w", streamFrom, err)
	}

	// 7. The filter, seeded with the catalogs' current filenodes, and the pump.
	p.filter = filter.New(filter.Config{DbOid: boot.FollowedDBOID})
	if err := seedCatalogs(ctx, p.filter.Tracker(), s.shadowDir(), s.cfg.SourceDSN, s.log); err != nil {
		return err
	}
	prefix := s.filteredStartSegment(p, start)
	p.pump, err = NewPump(start, PumpConfig{
		StartPrefix:     prefix,
		SegmentSize:     p.segSize,
		MaxBatchRecords: s.cfg.MaxBatchRecords,
		MaxBatchAge:     s.cfg.MaxBatchAge,
		HoldTimeout:     s.cfg.HoldTimeout,
		SelfRelease:     s.SelfRelease,
		Capture:         s.pumpCapture(p),
	}, filterDecider{p.filter}, p.walsender, p.archive.LSNSink(p.identity.Timeline), s.batches)
	if err != nil {
		return err
	}
	buf, err := xact.New(xact.Config{MemoryBudget: s.cfg.XactBufferBytes, SpillDir: s.spillDir()})
	if err != nil {
		return fmt.Errorf("opening the transaction buffer: %w", err)
	}
	p.reorder = newReorderer(buf, boot.FollowedDBOID, s.cfg.MaxBatchRecords, start, delivered)
	s.mu.Lock()
	s.startLSN = start
	s.reorderFloor = start
	s.reorderIdle, s.reorderConsumed = false, start
	s.saved = Manifest{}
	if prog != nil {
		s.saved = *prog
	}
	s.saved.SystemID, s.saved.Timeline = p.identity.SystemID, p.identity.Timeline
	s.saved.ServerVersionNum, s.saved.WALSegmentSize = boot.ServerVersionNum, int(p.segSize)
	s.saved.Restart = max(s.saved.Restart, start)
	s.saved.Floor = max(s.saved.Floor, start)
	s.catchUpTarget, s.catchUpLogged = 0, time.Now()
	s.delivered = delivered
	s.pending = nil
	s.acksChangedLocked()
	s.epoch++
	s.seq = 0
	s.mu.Unlock()
	reader, err := p.spool.NewReader(start, 0)
	if err != nil {
		return fmt.Errorf("%w: %w", errCorruptState, err)
	}
	s.log.Info("session started", "source", source.RedactDSN(s.cfg.SourceDSN), "start_lsn", start.String(),
		"stream_from", streamFrom.String(), "followed_db", pcfg.Database, "shadow", s.shadowDir(), "delivered_through", delivered.String())
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.receive(runCtx, p)
	}()
	go func() {
		defer wg.Done()
		s.feed(runCtx, p, reader)
	}()
	return nil
}

// checkSourceIdentity refuses a source that is not the one the state
// directory was built from (another cluster, or the same one on another
// timeline): the stored positions would not name the same WAL.
func (s *Session) checkSourceIdentity(ctx context.Context, stored source.Identity) error {
	c, err := source.Connect(ctx, s.cfg.SourceDSN)
	if err != nil {
		return fmt.Errorf("connecting to the source: %w", err)
	}
	defer c.Close(context.Background())
	current, err := c.IdentifySystem(ctx)
	if err != nil {
		return fmt.Errorf("identifying the source: %w", err)
	}
	if err := source.CheckIdentity(stored, current); err != nil {
		return fmt.Errorf("state_dir %s was built from %s (source %s): %w", s.cfg.StateDir, stored, source.RedactDSN(s.cfg.SourceDSN), err)
	}
	return nil
}

// filteredStartSegment is the filtered copy of the segment the pump starts
// at, as an earlier run published it: the shadow's pg_wal has it while it is
// the segment being received, the archive once it was complete. Nil when
// neither has it (a first start: nothing was published there yet). A copy
// whose first page names another address (a pg_wal file recycled under that
// name) is passed over for the next.
func (s *Session) filteredStartSegment(p *parts, start wal.LSN) []byte {
	name := p.archive.SegmentName(p.identity.Timeline, start)
	var first []byte
	for _, path := range []string{filepath.Join(s.shadowDir(), "pg_wal", name), p.archive.Path(name)} {
		b, err := os.ReadFile(path)
		if err != nil || len(b) == 0 {
			continue
		}
		if h, ok := wal.DecodePageHeader(b); ok && h.PageAddr == start {
			return b
		}
		if first == nil {
			first = b // the pump names the mismatch
		}
	}
	return first
}

func (s *Session) setParts(p *parts) {
	s.mu.Lock()
	s.parts = p
	s.runErr = nil
	s.mu.Unlock()
}

// failRun records the error that stopped the session's goroutines. The
// first one is what Next returns: the reader (the pg_physical_wal input)
// logs it once, with its restart back-off, so it is only a debug line here;
// errors after it are consequences of the stop.
func (s *Session) failRun(err error) {
	s.mu.Lock()
	first := s.runErr == nil
	if first {
		s.runErr = err
	}
	s.acksChangedLocked()
	s.mu.Unlock()
	if first {
		s.log.Debug("session run stopped", "error", err)
	} else {
		s.log.Debug("after the session run had stopped", "error", err)
	}
	if s.cancel != nil {
		s.cancel()
	}
}

// tick persists the manifest, reports positions to the source (the flush
// position as decideProgress says: the stored floor, or with release_slot
// spooled the spool's durable end), trims the spool, sweeps the archive,
// and updates metrics and the catch-up log.
func (s *Session) tick(ctx context.Context, p *parts) {
	now := time.Now()
	if c := p.stream.Client(); c != nil {
		s.observeSourceEnd(c.ServerWALEnd())
	}
	apply := p.walsender.ShadowApply()
	floor, delivered, deliveredThrough, deliveryPos := s.floor(p, apply)
	st := p.pump.Stats()
	_, spooled := p.spool.Extent()
	d := decideProgress(progressIn{
		now: now, saved: s.saved, savedAt: s.savedAt, segSize: p.segSize,
		received: spooled, spooled: p.spool.Durable(), filteredDurable: p.archive.DurableEnd(), apply: apply,
		floor: floor, delivered: delivered, deliveredThrough: deliveredThrough,
		releaseSpooled: s.releaseSpooled(), flushSent: s.flushSent, retention: s.cfg.RetentionBytes,
	})
	if d.write {
		if err := WriteManifest(s.cfg.StateDir, d.manifest); err != nil {
			s.failRun(fmt.Errorf("saving progress: %w", err))
			return
		}
		s.saved, s.savedAt = d.manifest, now
		// Page copies below the stored floor: forgotten only once many
		// are known (the floor may pass those of a transaction whose
		// commit is still to be decoded; see the filter's pageCopies).
		p.filter.ForgetPageCopiesBelow(d.manifest.Floor)
	}
	p.stream.SetPositions(d.slotWrite, d.slotFlush, d.slotApply)
	if d.sendStatus {
		if err := p.stream.SendStatus(ctx, false); err == nil {
			s.flushSent = d.slotFlush
		}
	}
	if d.restartMoved {
		if n, err := p.spool.Trim(d.trimBelow); err != nil {
			s.log.Warn("trimming the spool", "error", err)
		} else if n > 0 && Hooks.AfterSpoolTrim != nil {
			Hooks.AfterSpoolTrim()
		}
		if p.desclog.ShouldCompact() && s.compacting.CompareAndSwap(false, true) {
			// Off the record loop: a checkpoint rewrite must not stall
			// the receive loop.
			go func(floor wal.LSN) {
				defer s.compacting.Store(false)
				if err := p.desclog.Compact(floor); err != nil {
					s.failRun(fmt.Errorf("compacting the descriptor log: %w", err))
				}
			}(d.trimBelow)
		}
		if d.archiveKeep > 0 {
			if _, err := p.archive.Sweep(d.archiveKeep); err != nil {
				s.log.Warn("sweeping the archive", "error", err)
			}
		}
	}
	s.m.observe(st, spooled, p.walsender.Published(), apply)
	shadowPos := max(apply, s.saved.ShadowReplay)
	s.m.observeLag(s.lag.lag(shadowPos, now))
	s.m.observeDeliveryLag(s.lag.lag(deliveryPos, now))
	s.lag.prune(min(shadowPos, deliveryPos))
	s.logCatchUp(spooled, now)
	s.m.observeSpool(p.spool.Bytes(), p.spool.Segments(), spooled-min(spooled, p.pump.NextByte()), s.spoolFull.Load())
	s.mu.Lock()
	snap := s.xactSnap
	s.mu.Unlock()
	s.m.observeXact(snap)
	s.m.resumeLSN.Set(int64(s.saved.Restart))
	s.m.shadowRestarts.Incr(p.shadow.Restarts() - s.m.lastRestarts)
	s.m.lastRestarts = p.shadow.Restarts()
}

// observeSourceEnd notes the source's WAL end (from data and keepalives).
func (s *Session) observeSourceEnd(end wal.LSN) {
	if end > s.sourceEnd {
		s.sourceEnd = end
		s.lag.observe(end, time.Now())
	}
}

// logCatchUp reports, every 10 s until the stream reaches it, how far the
// stream is towards the source's WAL end as first seen after the start.
func (s *Session) logCatchUp(received wal.LSN, now time.Time) {
	if s.catchUpTarget == 0 {
		if s.sourceEnd == 0 {
			return
		}
		s.catchUpTarget = s.sourceEnd
		if s.catchUpTarget > received {
			s.log.Info("catching up with the source", "from", received.String(), "to", s.catchUpTarget.String(),
				"behind_mb", fmt.Sprintf("%.1f", float64(s.catchUpTarget-received)/(1<<20)))
		} else {
			s.catchUpTarget = 1 // nothing to catch up: never log
		}
		return
	}
	if s.catchUpTarget == 1 || s.startLSN >= s.catchUpTarget {
		return
	}
	if received >= s.catchUpTarget {
		s.log.Info("caught up with the source", "lsn", received.String(), "took", now.Sub(s.catchUpLogged).Round(time.Second).String())
		s.catchUpTarget = 1
		return
	}
	if now.Sub(s.catchUpLogged) >= 10*time.Second {
		total := float64(s.catchUpTarget - s.startLSN)
		done := float64(received - min(received, s.startLSN))
		s.log.Info(fmt.Sprintf("catching up with the source: %.0f%% (%.1f of %.1f MB)", 100*done/total, done/(1<<20), total/(1<<20)),
			"received", received.String(), "target", s.catchUpTarget.String())
		s.catchUpLogged = now
	}
}

// floor is the resume floor: nothing before it is needed again. It is at
// most the pump's decided position, the shadow's apply position, the
// reorderer's floor (open transactions' first changes, committed ones not
// yet emitted, records not yet taken from the pump) and the first change of
// every transaction in a batch not acknowledged downstream. delivered is
// read under the same lock, after the batches: a transaction acknowledged in
// between is then either still under the floor or already counted as
// delivered, never neither.
//
// deliveredThrough is the position every transaction committed at or
// before it has been acknowledged: delivered, or, with nothing pending and
// the reorderer idle, everything it consumed; lagPos is the same as an
// exclusive position (the delivery lag's).
func (s *Session) floor(p *parts, apply wal.LSN) (floor, delivered, deliveredThrough, lagPos wal.LSN) {
	f := p.pump.Decided()
	s.mu.Lock()
	f = min(f, s.reorderFloor)
	for _, b := range s.pending {
		if b.txFloor != 0 {
			f = min(f, b.txFloor)
		}
	}
	delivered = s.delivered
	deliveredThrough = s.deliveredThroughLocked()
	if s.drainedLocked() {
		lagPos = s.reorderConsumed
	}
	lagPos = max(lagPos, deliveredThrough)
	s.mu.Unlock()
	if apply == 0 {
		return min(f, s.startLSN), delivered, deliveredThrough, lagPos
	}
	return min(f, apply), delivered, deliveredThrough, lagPos
}

// Next returns the next batch of committed transactions, blocking until
// one is ready, ctx ends, or the session fails or closes. Each transaction
// comes whole and in commit order: its commit record first (carrying the
// catalog boundary when it is one), then its row changes merged by LSN, the
// last item flagged; a large transaction spans several batches. After a
// failure of the running session Next returns that error (wrapped in
// ErrStopped): Start may then be called again.
func (s *Session) Next(ctx context.Context) (*Batch, error) {
	s.nextMu.Lock()
	defer s.nextMu.Unlock()
	s.mu.Lock()
	done, runErr, p := s.done, s.runErr, s.parts
	s.mu.Unlock()
	if runErr != nil {
		return nil, fmt.Errorf("%w: %w", ErrStopped, runErr)
	}
	if p == nil || p.reorder == nil {
		return nil, fmt.Errorf("%w: the session is not started", ErrStopped)
	}
	if err := s.awaitRoom(ctx, done); err != nil {
		return nil, err
	}
	r := p.reorder
	out := &Batch{}
	for {
		if err := r.fill(out); err != nil {
			s.failRun(err)
			return nil, fmt.Errorf("%w: %w", ErrStopped, err)
		}
		if len(out.Items) >= r.max || !r.idle() {
			break // full, or the next transaction holds another boundary
		}
		var pb *Batch
		if len(out.Items) > 0 {
			select {
			case pb = <-s.batches:
			default:
			}
			if pb == nil {
				break
			}
		} else {
			select {
			case pb = <-s.batches:
			case <-s.closedCh:
				return nil, ErrClosed
			case <-done:
				s.mu.Lock()
				defer s.mu.Unlock()
				if s.runErr != nil {
					return nil, fmt.Errorf("%w: %w", ErrStopped, s.runErr)
				}
				return nil, ErrClosed
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		var spills int64
		if Hooks.AfterSpill != nil {
			spills = r.buf.Stats().Spills
		}
		if err := r.consume(pb); err != nil {
			s.failRun(err)
			return nil, fmt.Errorf("%w: %w", ErrStopped, err)
		}
		if Hooks.AfterSpill != nil && r.buf.Stats().Spills > spills {
			Hooks.AfterSpill()
		}
		s.mu.Lock()
		s.reorderFloor = r.floor()
		// Items already in out are not pending yet: not idle until the
		// batch they go out in is.
		s.reorderIdle, s.reorderConsumed = r.idle() && len(out.Items) == 0, r.consumed
		s.mu.Unlock()
	}
	st := r.buf.Stats()
	s.mu.Lock()
	s.seq++
	out.Seq, out.Epoch = s.seq, s.epoch
	s.pending = append(s.pending, out)
	s.reorderFloor = r.floor()
	s.reorderIdle, s.reorderConsumed = r.idle(), r.consumed
	s.xactSnap = xactSnapshot{memory: st.MemoryBytes, spilled: st.SpilledBytes, spills: st.Spills, open: st.OpenXIDs, reorder: r.stats}
	s.mu.Unlock()
	return out, nil
}

// awaitRoom blocks while the batches handed out and not yet acknowledged
// hold max_pending_bytes of records or more: each is held decoded
// downstream until the output has written it, so this bounds the memory
// a backlog takes (one batch always goes out). It returns nil once there
// is room or the run ended (Next reports how).
func (s *Session) awaitRoom(ctx context.Context, done <-chan struct{}) error {
	for {
		s.mu.Lock()
		if s.runErr != nil || s.cfg.MaxPendingBytes <= 0 || s.pendingBytesLocked() < s.cfg.MaxPendingBytes {
			s.mu.Unlock()
			return nil
		}
		if s.acksCh == nil {
			s.acksCh = make(chan struct{})
		}
		ch := s.acksCh
		s.mu.Unlock()
		select {
		case <-ch: // the head moved, or the run changed
		case <-s.closedCh:
			return ErrClosed
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// pendingBytesLocked is the record bytes of the batches handed out and
// not acknowledged (as a prefix); s.mu held.
func (s *Session) pendingBytesLocked() int64 {
	var n int64
	for _, b := range s.pending {
		n += int64(b.size)
	}
	return n
}

// ErrStopped wraps the error that stopped a running session.
var ErrStopped = errors.New("walshadow session stopped")

// Ack marks a batch delivered downstream. Batches may be acknowledged out
// of order; the delivered position moves over the acknowledged prefix only.
// Once the run has failed, acknowledgements move nothing: the next start
// resumes from the durable state.
func (s *Session) Ack(b *Batch) {
	s.mu.Lock()
	b.acked = true
	if s.runErr != nil {
		s.mu.Unlock()
		b.Release()
		return
	}
	for len(s.pending) > 0 && s.pending[0].acked {
		if d := s.pending[0].delivers; d > s.delivered {
			s.delivered = d
		}
		s.pending = s.pending[1:]
		s.acksChangedLocked()
	}
	s.mu.Unlock()
	b.Release()
}

// AwaitEarlier blocks until every batch of run epoch handed out before
// batch seq is acknowledged, or that run stopped (a later run started, or
// it failed: its batches are stale, which Live tells), and reports whether
// it had to wait.
// Pipeline threads may deliver a run's batches to the output in any
// order; written in the order of their numbers, a batch's schema events
// and commits are never overtaken by a later batch's.
func (s *Session) AwaitEarlier(ctx context.Context, epoch, seq uint64) (waited bool, err error) {
	for ; ; waited = true {
		s.mu.Lock()
		if epoch != s.epoch || s.runErr != nil || s.parts == nil ||
			len(s.pending) == 0 || s.pending[0].Seq >= seq {
			s.mu.Unlock()
			return waited, nil
		}
		if s.acksCh == nil {
			s.acksCh = make(chan struct{})
		}
		ch := s.acksCh
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return waited, ctx.Err()
		}
	}
}

// OldestUnacked is the first batch of run epoch handed out and not
// acknowledged yet (ok false: none, or epoch is not the current run).
func (s *Session) OldestUnacked(epoch uint64) (seq uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if epoch != s.epoch || len(s.pending) == 0 {
		return 0, false
	}
	return s.pending[0].Seq, true
}

// acksChangedLocked wakes AwaitEarlier's waiters; s.mu held.
func (s *Session) acksChangedLocked() {
	if s.acksCh != nil {
		close(s.acksCh)
		s.acksCh = nil
	}
}

// Fail stops the running session with err (a downstream component found
// something it cannot go past). Nothing acknowledged after it counts; the
// next Start resumes from the durable state.
func (s *Session) Fail(err error) { s.failRun(err) }

// Live reports whether batches of run epoch still count: it is the current
// run and it has not failed. Downstream writes of a stopped run's batches
// must not happen: the next run streams them again from the floor, and a
// later batch written ahead of an earlier failed one would be recorded as
// done past what is.
func (s *Session) Live(epoch uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return epoch == s.epoch && s.runErr == nil && s.parts != nil
}

// Epoch numbers the session's runs; batch sequence numbers restart at 1 in
// each.
func (s *Session) Epoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

// Delivered is the commit LSN through which every transaction has been
// acknowledged downstream.
func (s *Session) Delivered() wal.LSN {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.delivered
}

// drainedLocked: nothing pending downstream and the reorderer idle.
func (s *Session) drainedLocked() bool {
	return len(s.pending) == 0 && s.reorderIdle && s.reorderConsumed > 0
}

// deliveredThroughLocked is the position every transaction committed at or
// before it has been acknowledged downstream: delivered, or, with nothing
// pending and the reorderer idle, everything consumed so far.
func (s *Session) deliveredThroughLocked() wal.LSN {
	if s.drainedLocked() {
		// consumed is exclusive (the next record starts there, maybe a
		// commit not emitted yet); delivered is inclusive of its commit.
		return max(s.delivered, s.reorderConsumed-1)
	}
	return s.delivered
}

// Shadow gives access to the running shadow (nil before Start).
func (s *Session) Shadow() *shadow.Shadow {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parts == nil {
		return nil
	}
	return s.parts.shadow
}

// Stats reports the pump's counters and positions (zero before Start).
func (s *Session) Stats() (PumpStats, wal.LSN, wal.LSN) {
	s.mu.Lock()
	p := s.parts
	s.mu.Unlock()
	if p == nil || p.pump == nil {
		return PumpStats{}, 0, 0
	}
	return p.pump.Stats(), p.walsender.Published(), p.walsender.ShadowApply()
}

func (s *Session) stopLocked() {
	if s.cancel != nil {
		s.cancel()
	}
	if s.done != nil {
		<-s.done
	}
	s.nextMu.Lock()
	s.mu.Lock()
	p := s.parts
	s.parts = nil
	s.pending = nil
	s.acksChangedLocked()
	s.mu.Unlock()
	// Batches of the stopped pump are stale: the next start re-reads from
	// the floor.
	for drained := false; !drained; {
		select {
		case b := <-s.batches:
			b.Release()
		default:
			drained = true
		}
	}
	if p != nil && p.reorder != nil {
		p.reorder.reset()
		if err := p.reorder.buf.Close(); err != nil {
			s.log.Warn("closing the transaction buffer", "error", err)
		}
	}
	s.nextMu.Unlock()
	if p != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if p.stream != nil {
			p.stream.Close(ctx)
		}
		if s.captureMu.TryLock() { // (a capture still running is ended by the shadow's stop)
			if p.captureConn != nil {
				_ = p.captureConn.Close(ctx)
				p.captureConn = nil
			}
			s.captureMu.Unlock()
		}
		if p.shadow != nil {
			if err := p.shadow.Stop(ctx); err != nil {
				s.log.Warn("stopping the shadow", "error", err)
			}
		}
		if p.walsender != nil {
			p.walsender.Close()
		}
		if p.bridge != nil {
			p.bridge.Close()
		}
		if p.desclog != nil {
			if err := p.desclog.Close(); err != nil {
				s.log.Warn("closing the descriptor log", "error", err)
			}
		}
		if p.spool != nil {
			if err := p.spool.Close(); err != nil {
				s.log.Warn("closing the spool", "error", err)
			}
		}
	}
	s.cancel, s.done, s.running = nil, nil, false
}

// Close stops everything the session started.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.closedCh)
	}
	s.mu.Unlock()
	s.startMu.Lock()
	defer s.startMu.Unlock()
	s.stopLocked()
	return nil
}

// StateDir is the session's state directory (components keep their own
// state beside the session's, e.g. the ClickHouse output's agreed shapes).
func (s *Session) StateDir() string { return s.cfg.StateDir }

// SourceDSN is the source's connection string (with its password: never
// log it, see source.RedactDSN).
func (s *Session) SourceDSN() string { return s.cfg.SourceDSN }
