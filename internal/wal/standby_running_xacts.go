package wal

// runningXactsHeaderSize is offsetof(xl_running_xacts, xids).
const runningXactsHeaderSize = 24

// RunningXacts is a Standby RUNNING_XACTS record (xl_running_xacts): a
// snapshot of the transactions in progress, logged at checkpoints and by the
// bgwriter. Logical decoding starts from one of these.
type RunningXacts struct {
	// SubxidOverflow: some backend had more subxacts than it could cache, so
	// Subxids is incomplete (and then empty).
	SubxidOverflow     bool
	NextXID            uint32
	OldestRunningXID   uint32
	LatestCompletedXID uint32
	Xids               XIDList // top-level xids (xcnt of them)
	Subxids            XIDList // the subxids (subxcnt) stored after them
}

func (*RunningXacts) walBody() {}

// Decode parses rec's main data, reusing dst.
func (dst *RunningXacts) Decode(rec *Record) error {
	const what = "running xacts"
	*dst = RunningXacts{}
	c := newMainDataCursor(rec, what)
	if err := c.need(runningXactsHeaderSize, "xl_running_xacts"); err != nil {
		return err
	}
	xcnt := int32(c.u32())
	subxcnt := int32(c.u32())
	if xcnt < 0 || subxcnt < 0 {
		return errorf(rec.LSN, KindCorrupt, "%s: negative count (xcnt %d, subxcnt %d)", what, xcnt, subxcnt)
	}
	dst.SubxidOverflow = c.u8() != 0
	c.skip(3) // padding after the bool
	dst.NextXID = c.u32()
	dst.OldestRunningXID = c.u32()
	dst.LatestCompletedXID = c.u32()
	xids, err := c.array(int(xcnt), 4, "xids")
	if err != nil {
		return err
	}
	subxids, err := c.array(int(subxcnt), 4, "subxids")
	if err != nil {
		return err
	}
	dst.Xids = XIDList{xids}
	dst.Subxids = XIDList{subxids}
	return nil
}
