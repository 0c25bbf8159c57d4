package wal

// Transaction rmgr opcodes (access/xact.h): xl_info & XLogXactOpMask.
const (
	XLogXactCommit         = 0x00
	XLogXactPrepare        = 0x10
	XLogXactAbort          = 0x20
	XLogXactCommitPrepared = 0x30
	XLogXactAbortPrepared  = 0x40
	XLogXactAssignment     = 0x50
	XLogXactInvalidations  = 0x60

	XLogXactOpMask = 0x70
	// XLogXactHasInfo: the commit/abort record carries an xinfo word.
	XLogXactHasInfo = 0x80
)

// xinfo bits of commit/abort records: which optional parts follow.
const (
	XactXinfoHasDBInfo       = 1 << 0
	XactXinfoHasSubxacts     = 1 << 1
	XactXinfoHasRelFileNodes = 1 << 2 // XACT_XINFO_HAS_RELFILELOCATORS in 16+
	XactXinfoHasInvals       = 1 << 3
	XactXinfoHasTwoPhase     = 1 << 4
	XactXinfoHasOrigin       = 1 << 5
	XactXinfoHasAELocks      = 1 << 6
	XactXinfoHasGID          = 1 << 7
	XactXinfoHasDroppedStats = 1 << 8

	// Completion flags: actions recovery must take, also kept in xinfo.
	XactCompletionApplyFeedback      = 1 << 29
	XactCompletionUpdateRelcacheFile = 1 << 30
	XactCompletionForceSyncCommit    = 1 << 31
)

// TwoPhaseMagic is TWOPHASE_MAGIC, the first word of a PREPARE record.
const TwoPhaseMagic = 0x57F94534

// XactOpcode returns the transaction opcode of a Transaction-rmgr info byte.
func XactOpcode(info uint8) uint8 { return info & XLogXactOpMask }
