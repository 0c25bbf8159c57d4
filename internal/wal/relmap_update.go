package wal

// RelMap rmgr opcode (utils/relmapper.h).
const XLogRelMapUpdate = 0x00

// RelMapUpdate is a RelMap UPDATE record (xl_relmap_update): a database's
// (or, with DbOid 0, the shared) pg_filenode.map was rewritten, e.g. by
// VACUUM FULL of a mapped catalog. Map is the decoded new file content.
type RelMapUpdate struct {
	DbOid  uint32 // 0 for the shared map
	TsOid  uint32 // the database's tablespace, or pg_global
	NBytes int32
	Data   []byte // the raw map file, aliasing the record
	Map    RelMapFile
}

func (*RelMapUpdate) walBody() {}

// Decode parses rec's main data, reusing dst.
func (dst *RelMapUpdate) Decode(rec *Record) error {
	const what = "relmap update"
	*dst = RelMapUpdate{}
	c := newMainDataCursor(rec, what)
	if err := c.need(12, "xl_relmap_update"); err != nil {
		return err
	}
	dst.DbOid = c.u32()
	dst.TsOid = c.u32()
	dst.NBytes = int32(c.u32())
	data, err := c.array(int(dst.NBytes), 1, "map bytes")
	if err != nil {
		return err
	}
	dst.Data = data
	return dst.Map.decode(data, rec.LSN, what)
}

// decodeRelMapBody decodes a RelMap-rmgr record body.
func decodeRelMapBody(rec *Record) (Body, error) {
	if rec.RmgrInfo() == XLogRelMapUpdate {
		return decodeBodyInto(rec, &RelMapUpdate{})
	}
	return nil, errorf(rec.LSN, KindUnsupported, "relmap record: unknown info 0x%02X", rec.Header.Info)
}
