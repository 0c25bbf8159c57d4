package wal

// xactPrepareHeaderSize is sizeof(xl_xact_prepare) (TwoPhaseFileHeader),
// already a multiple of MAXALIGN.
const xactPrepareHeaderSize = 72

// XactPrepare is a PREPARE record: the two-phase state file as written to
// WAL (twophase.c StartPrepare/EndPrepare, parsed like ParsePrepareRecord).
// The xl_xact_prepare header is followed by the GID, subxacts, commit rels,
// abort rels, commit stats, abort stats and invalidation messages, each
// padded to MAXALIGN, then the 2PC rmgr records (locks, predicate locks, ...)
// ending with a sentinel. Lists alias the record.
type XactPrepare struct {
	Magic      uint32 // TwoPhaseMagic
	TotalLen   uint32 // state file length: the main data plus a 4-byte CRC
	XID        uint32 // the prepared transaction
	DbOid      uint32
	PreparedAt int64 // TimestampTz
	Owner      uint32
	// InitFileInval: the relcache init file must be invalidated on commit.
	InitFileInval bool
	GID           []byte // without its NUL

	Subxacts     XIDList
	CommitRels   RelFileNodeList
	AbortRels    RelFileNodeList
	CommitStats  DroppedStatsList
	AbortStats   DroppedStatsList
	Invals       InvalMessages
	OriginLSN    LSN // set when the PREPARE came from a replication origin
	OriginTime   int64
	TwoPhaseData []byte // the TwoPhaseRecordOnDisk chain after the fixed parts
}

func (*XactPrepare) walBody() {}

// Decode parses rec's main data, reusing dst.
func (dst *XactPrepare) Decode(rec *Record) error {
	const what = "xact prepare"
	*dst = XactPrepare{}
	layout, err := layoutOf(rec, what)
	if err != nil {
		return err
	}
	c := newMainDataCursor(rec, what)
	if err := c.need(xactPrepareHeaderSize, "xl_xact_prepare"); err != nil {
		return err
	}
	dst.Magic = c.u32()
	if dst.Magic != TwoPhaseMagic {
		return errorf(rec.LSN, KindCorrupt, "%s: magic 0x%08X, want 0x%08X", what, dst.Magic, uint32(TwoPhaseMagic))
	}
	dst.TotalLen = c.u32()
	dst.XID = c.u32()
	dst.DbOid = c.u32()
	dst.PreparedAt = int64(c.u64())
	dst.Owner = c.u32()
	var counts [6]int // nsubxacts, ncommitrels, nabortrels, ncommitstats, nabortstats, ninvalmsgs
	for i := range counts {
		n := int32(c.u32())
		if n < 0 {
			return errorf(rec.LSN, KindCorrupt, "%s: negative count %d at offset %d", what, n, c.off-4)
		}
		counts[i] = int(n)
	}
	dst.InitFileInval = c.u8() != 0
	c.skip(1) // padding before gidlen
	gidLen := int(c.u16())
	dst.OriginLSN = LSN(c.u64())
	dst.OriginTime = int64(c.u64())

	// Each part is padded to MAXALIGN. Only the part itself must be
	// present: ParsePrepareRecord never reads the padding.
	part := func(n, itemSize int, field string) ([]byte, error) {
		b, err := c.array(n, itemSize, field)
		if err != nil {
			return nil, err
		}
		c.skip(min(MaxAlign(len(b))-len(b), c.remaining()))
		return b, nil
	}
	// gidlen counts the NUL (strlen + 1), so it can never be 0.
	gid, err := part(gidLen, 1, "GID bytes")
	if err != nil {
		return err
	}
	if gidLen == 0 || gid[gidLen-1] != 0 {
		return errorf(rec.LSN, KindCorrupt, "%s: GID of %d bytes is not NUL-terminated", what, gidLen)
	}
	for i, b := range gid {
		if b == 0 {
			gid = gid[:i:i]
			break
		}
	}
	dst.GID = gid
	b, err := part(counts[0], 4, "subxacts")
	if err != nil {
		return err
	}
	dst.Subxacts = XIDList{b}
	if b, err = part(counts[1], relFileNodeSize, "commit relfilenodes"); err != nil {
		return err
	}
	dst.CommitRels = RelFileNodeList{b}
	if b, err = part(counts[2], relFileNodeSize, "abort relfilenodes"); err != nil {
		return err
	}
	dst.AbortRels = RelFileNodeList{b}
	if b, err = part(counts[3], layout.DroppedStatsItemSize, "commit dropped stats"); err != nil {
		return err
	}
	dst.CommitStats = DroppedStatsList{b, layout.DroppedStatsItemSize}
	if b, err = part(counts[4], layout.DroppedStatsItemSize, "abort dropped stats"); err != nil {
		return err
	}
	dst.AbortStats = DroppedStatsList{b, layout.DroppedStatsItemSize}
	if b, err = part(counts[5], InvalMessageSize, "invalidation messages"); err != nil {
		return err
	}
	if err := dst.Invals.Decode(rec, b, counts[5]); err != nil {
		return err
	}
	if c.remaining() > 0 {
		dst.TwoPhaseData = c.src[c.off:]
	}
	return nil
}
