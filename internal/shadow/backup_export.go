package shadow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/walshadow/walshadow/internal/wal"
)

// BaseBackupOptions tunes ReadBaseBackup's BASE_BACKUP.
type BaseBackupOptions struct {
	Label string // backup label; "" means "walshadow-load"
	Fast  bool   // CHECKPOINT 'fast' rather than waiting for the next spread checkpoint
	// MaxRate caps the source's send rate in KB/s (32..1048576); 0 = no cap.
	MaxRate int
	// ApplicationName names the walsender in pg_stat_activity ("" keeps
	// the DSN's).
	ApplicationName string
}

// loadBackupCommand builds the BASE_BACKUP for an initial load: no WAL (the
// load tags rows with a position WAL coverage already starts at), no
// manifest, no progress estimate (it costs the source a directory walk).
func loadBackupCommand(opt BaseBackupOptions) (string, error) {
	label := opt.Label
	if label == "" {
		label = "walshadow-load"
	}
	opts := []string{"LABEL " + quoteLiteral(label), "WAL false", "MANIFEST 'no'", "WAIT false"}
	if opt.Fast {
		opts = append(opts, "CHECKPOINT 'fast'")
	}
	switch {
	case opt.MaxRate < 0:
		return "", fmt.Errorf("BASE_BACKUP max rate %d KB/s is negative", opt.MaxRate)
	case opt.MaxRate > 0:
		if opt.MaxRate < 32 || opt.MaxRate > 1048576 {
			return "", fmt.Errorf("BASE_BACKUP max rate %d KB/s outside PostgreSQL's [32, 1048576]", opt.MaxRate)
		}
		opts = append(opts, "MAX_RATE "+strconv.Itoa(opt.MaxRate))
	}
	return "BASE_BACKUP (" + strings.Join(opts, ", ") + ")", nil
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// ReadBaseBackup opens a replication connection to dsn, runs BASE_BACKUP
// (no WAL) and calls visit with each tablespace archive's tar stream in
// order: the data directory (base.tar) as BackupTablespace{} (OID 0), a
// tablespace as its row of the tablespace list. visit need not read its
// stream to the end. It returns the backup's start and end LSNs.
func ReadBaseBackup(ctx context.Context, dsn string, opt BaseBackupOptions, log *slog.Logger,
	visit func(spc BackupTablespace, r io.Reader) error) (start, end wal.LSN, err error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cmd, err := loadBackupCommand(opt)
	if err != nil {
		return 0, 0, err
	}
	pcfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return 0, 0, fmt.Errorf("parsing the source DSN: %w", err)
	}
	pcfg.RuntimeParams["replication"] = "true"
	if opt.ApplicationName != "" {
		pcfg.RuntimeParams["application_name"] = opt.ApplicationName
	}
	conn, err := pgconn.ConnectConfig(ctx, pcfg)
	if err != nil {
		return 0, 0, fmt.Errorf("opening a replication connection to the source: %w", err)
	}
	defer conn.Close(context.Background())

	conn.Frontend().SendQuery(&pgproto3.Query{String: cmd})
	if err := conn.Frontend().Flush(); err != nil {
		return 0, 0, fmt.Errorf("sending BASE_BACKUP: %w", err)
	}
	stream, err := newBackupStream(ctx, conn, log)
	if err != nil {
		return 0, 0, err
	}
	log.Info("BASE_BACKUP for an initial load started", "start_lsn", stream.proto.Start,
		"timeline", stream.proto.StartTLI, "tablespaces", len(stream.proto.Tablespaces))
	if err := visitArchives(stream, visit); err != nil {
		return 0, 0, err
	}
	p := &stream.proto
	if p.EndTLI != p.StartTLI {
		return 0, 0, fmt.Errorf("the source switched timeline during BASE_BACKUP (%d to %d)", p.StartTLI, p.EndTLI)
	}
	return p.Start, p.End, nil
}

// visitArchives hands every archive of the COPY stream to visit, reads the
// rest of each (tar end blocks, or what visit left) and the command's end.
func visitArchives(stream *backupStream, visit func(spc BackupTablespace, r io.Reader) error) error {
	for {
		arc, ok, err := stream.nextArchive()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		spc, err := stream.proto.archiveTablespaceOf(arc)
		if err != nil {
			return err
		}
		ts := BackupTablespace{}
		if spc != 0 {
			ts = BackupTablespace{OID: uint32(spc), Location: arc.location}
		}
		if err := visit(ts, stream); err != nil {
			return fmt.Errorf("BASE_BACKUP archive %s: %w", arc.name, err)
		}
		if _, err := io.Copy(io.Discard, stream); err != nil {
			return err
		}
	}
	if err := stream.finish(); err != nil {
		return err
	}
	if stream.proto.End == 0 {
		return errors.New("BASE_BACKUP: finished without an end position")
	}
	return nil
}
