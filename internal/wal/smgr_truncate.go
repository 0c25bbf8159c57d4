package wal

// xl_smgr_truncate flags: which forks were truncated.
const (
	SmgrTruncateHeap = 0x0001
	SmgrTruncateVM   = 0x0002
	SmgrTruncateFSM  = 0x0004
	SmgrTruncateAll  = SmgrTruncateHeap | SmgrTruncateVM | SmgrTruncateFSM
)

// SmgrTruncate is a Storage TRUNCATE record (xl_smgr_truncate): the
// relation's main fork was cut to BlkNo blocks (VACUUM's trailing-page
// truncation), with the VM and FSM adjusted per Flags.
type SmgrTruncate struct {
	BlkNo uint32
	Rel   RelFileNode
	Flags uint32
}

func (*SmgrTruncate) walBody() {}

// Decode parses rec's main data, reusing dst.
func (dst *SmgrTruncate) Decode(rec *Record) error {
	*dst = SmgrTruncate{}
	c := newMainDataCursor(rec, "smgr truncate")
	if err := c.need(20, "xl_smgr_truncate"); err != nil {
		return err
	}
	dst.BlkNo = c.u32()
	dst.Rel = c.relFileNode()
	dst.Flags = c.u32()
	return nil
}

// TruncatesHeap reports SMGR_TRUNCATE_HEAP: the main fork was truncated.
func (src *SmgrTruncate) TruncatesHeap() bool { return src.Flags&SmgrTruncateHeap != 0 }

// TruncatesVM reports SMGR_TRUNCATE_VM.
func (src *SmgrTruncate) TruncatesVM() bool { return src.Flags&SmgrTruncateVM != 0 }

// TruncatesFSM reports SMGR_TRUNCATE_FSM.
func (src *SmgrTruncate) TruncatesFSM() bool { return src.Flags&SmgrTruncateFSM != 0 }
