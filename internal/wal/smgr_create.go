package wal

// Storage rmgr opcodes (catalog/storage_xlog.h): xl_info & 0xF0.
const (
	XLogSmgrCreate   = 0x10
	XLogSmgrTruncate = 0x20
)

// maxForkNumber is MAX_FORKNUM (INIT_FORKNUM).
const maxForkNumber = ForkInit

// SmgrCreate is a Storage CREATE record (xl_smgr_create): a relation fork's
// file was created, e.g. for a new table or a rewrite into a new relfilenode.
type SmgrCreate struct {
	Rel  RelFileNode
	Fork ForkNumber
}

func (*SmgrCreate) walBody() {}

// Decode parses rec's main data, reusing dst.
func (dst *SmgrCreate) Decode(rec *Record) error {
	*dst = SmgrCreate{}
	c := newMainDataCursor(rec, "smgr create")
	if err := c.need(16, "xl_smgr_create"); err != nil {
		return err
	}
	dst.Rel = c.relFileNode()
	fork := int32(c.u32())
	if fork < 0 || fork > int32(maxForkNumber) {
		return errorf(rec.LSN, KindCorrupt, "smgr create: fork number %d out of range", fork)
	}
	dst.Fork = ForkNumber(fork)
	return nil
}
