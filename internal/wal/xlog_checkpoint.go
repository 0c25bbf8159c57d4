package wal

// checkpointSize is sizeof(CheckPoint), 88 in PG15–18.
const checkpointSize = 88

// Checkpoint is a CHECKPOINT_SHUTDOWN or CHECKPOINT_ONLINE record: the
// CheckPoint struct that also lands in pg_control.
type Checkpoint struct {
	Shutdown        bool
	Redo            LSN // where replay must start for this checkpoint
	ThisTimeLineID  uint32
	PrevTimeLineID  uint32
	FullPageWrites  bool
	WalLevel        WalLevel // PG17+; WalLevelUnknown before
	NextXID         uint64   // FullTransactionId: epoch << 32 | xid
	NextOID         uint32
	NextMulti       uint32
	NextMultiOffset uint32
	OldestXID       uint32
	OldestXIDDB     uint32
	OldestMulti     uint32
	OldestMultiDB   uint32
	Time            int64 // pg_time_t: Unix seconds
	OldestCommitTs  uint32
	NewestCommitTs  uint32
	// OldestActiveXID is only computed for online checkpoints at
	// wal_level >= replica; 0 otherwise.
	OldestActiveXID uint32
}

func (*Checkpoint) walBody() {}

// Decode parses rec's main data, reusing dst.
func (dst *Checkpoint) Decode(rec *Record) error {
	const what = "checkpoint"
	*dst = Checkpoint{}
	layout, err := layoutOf(rec, what)
	if err != nil {
		return err
	}
	c := newMainDataCursor(rec, what)
	if err := c.need(checkpointSize, "CheckPoint"); err != nil {
		return err
	}
	dst.Shutdown = rec.RmgrInfo() == XLogCheckpointShutdown
	dst.Redo = LSN(c.u64())
	dst.ThisTimeLineID = c.u32()
	dst.PrevTimeLineID = c.u32()
	dst.FullPageWrites = c.u8() != 0
	c.skip(3)
	dst.WalLevel = WalLevelUnknown
	if layout.HasCheckpointRedo { // wal_level@20 arrived with CHECKPOINT_REDO in 17
		dst.WalLevel = WalLevel(int32(c.u32()))
	} else {
		c.skip(4)
	}
	dst.NextXID = c.u64()
	dst.NextOID = c.u32()
	dst.NextMulti = c.u32()
	dst.NextMultiOffset = c.u32()
	dst.OldestXID = c.u32()
	dst.OldestXIDDB = c.u32()
	dst.OldestMulti = c.u32()
	dst.OldestMultiDB = c.u32()
	c.skip(4)
	dst.Time = int64(c.u64())
	dst.OldestCommitTs = c.u32()
	dst.NewestCommitTs = c.u32()
	dst.OldestActiveXID = c.u32()
	return nil
}

// NextXIDEpoch returns the epoch half of NextXID.
func (src *Checkpoint) NextXIDEpoch() uint32 { return uint32(src.NextXID >> 32) }

// CheckpointRedo is a CHECKPOINT_REDO record (PG17+): it marks the redo
// point of an online checkpoint that is starting.
type CheckpointRedo struct {
	WalLevel WalLevel
}

func (*CheckpointRedo) walBody() {}

// Decode parses rec's main data, reusing dst.
func (dst *CheckpointRedo) Decode(rec *Record) error {
	*dst = CheckpointRedo{}
	c := newMainDataCursor(rec, "checkpoint redo")
	if err := c.need(4, "wal_level"); err != nil {
		return err
	}
	dst.WalLevel = WalLevel(int32(c.u32()))
	return nil
}
