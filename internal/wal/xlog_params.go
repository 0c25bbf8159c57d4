package wal

// parameterChangeSize is the used part of xl_parameter_change: six ints and
// two bools (the struct is padded to 28).
const parameterChangeSize = 26

// ParameterChange is an XLOG PARAMETER_CHANGE record (xl_parameter_change),
// logged at startup when settings that standbys must match have changed.
// WalLevel tells walshadow whether heap records carry logical information.
type ParameterChange struct {
	MaxConnections       int32
	MaxWorkerProcesses   int32
	MaxWalSenders        int32
	MaxPreparedXacts     int32
	MaxLocksPerXact      int32
	WalLevel             WalLevel
	WalLogHints          bool
	TrackCommitTimestamp bool
}

func (*ParameterChange) walBody() {}

// Decode parses rec's main data, reusing dst.
func (dst *ParameterChange) Decode(rec *Record) error {
	*dst = ParameterChange{}
	c := newMainDataCursor(rec, "parameter change")
	if err := c.need(parameterChangeSize, "xl_parameter_change"); err != nil {
		return err
	}
	dst.MaxConnections = int32(c.u32())
	dst.MaxWorkerProcesses = int32(c.u32())
	dst.MaxWalSenders = int32(c.u32())
	dst.MaxPreparedXacts = int32(c.u32())
	dst.MaxLocksPerXact = int32(c.u32())
	dst.WalLevel = WalLevel(int32(c.u32()))
	dst.WalLogHints = c.u8() != 0
	dst.TrackCommitTimestamp = c.u8() != 0
	return nil
}
