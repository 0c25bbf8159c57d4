package wal

import "fmt"

// XLOG rmgr opcodes (catalog/pg_control.h): xl_info & 0xF0.
const (
	XLogCheckpointShutdown  = 0x00
	XLogCheckpointOnline    = 0x10
	XLogNoop                = 0x20
	XLogNextOID             = 0x30
	XLogSwitch              = 0x40
	XLogBackupEnd           = 0x50
	XLogParameterChange     = 0x60
	XLogRestorePoint        = 0x70
	XLogFPWChange           = 0x80
	XLogEndOfRecovery       = 0x90
	XLogFPIForHint          = 0xA0
	XLogFPI                 = 0xB0
	XLogOverwriteContrecord = 0xD0
	XLogCheckpointRedo      = 0xE0 // PG17+
)

// WalLevel is the server's wal_level setting (xlog.h WalLevel).
type WalLevel int32

const (
	// WalLevelUnknown: the record does not carry wal_level in this version.
	WalLevelUnknown WalLevel = -1
	WalLevelMinimal WalLevel = 0
	WalLevelReplica WalLevel = 1
	WalLevelLogical WalLevel = 2
)

func (l WalLevel) String() string {
	switch l {
	case WalLevelUnknown:
		return "unknown"
	case WalLevelMinimal:
		return "minimal"
	case WalLevelReplica:
		return "replica"
	case WalLevelLogical:
		return "logical"
	}
	return fmt.Sprintf("WalLevel(%d)", int32(l))
}

// decodeXLOGBody decodes an XLOG-rmgr record body.
func decodeXLOGBody(rec *Record) (Body, error) {
	switch rec.RmgrInfo() {
	case XLogCheckpointShutdown, XLogCheckpointOnline:
		return decodeBodyInto(rec, &Checkpoint{})
	case XLogNoop:
		return decodeBodyInto(rec, &Noop{})
	case XLogNextOID:
		return decodeBodyInto(rec, &NextOID{})
	case XLogSwitch:
		return decodeBodyInto(rec, &Switch{})
	case XLogBackupEnd:
		return decodeBodyInto(rec, &BackupEnd{})
	case XLogParameterChange:
		return decodeBodyInto(rec, &ParameterChange{})
	case XLogRestorePoint:
		return decodeBodyInto(rec, &RestorePoint{})
	case XLogFPWChange:
		return decodeBodyInto(rec, &FPWChange{})
	case XLogEndOfRecovery:
		return decodeBodyInto(rec, &EndOfRecovery{})
	case XLogFPIForHint, XLogFPI:
		return decodeBodyInto(rec, &FPI{})
	case XLogOverwriteContrecord:
		return decodeBodyInto(rec, &OverwriteContrecord{})
	case XLogCheckpointRedo:
		if rec.Layout != nil && rec.Layout.HasCheckpointRedo {
			return decodeBodyInto(rec, &CheckpointRedo{})
		}
	}
	return nil, errorf(rec.LSN, KindUnsupported, "XLOG record: unknown info 0x%02X", rec.Header.Info)
}
