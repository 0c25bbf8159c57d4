package wal

// decodeSmgrBody decodes a Storage-rmgr record body.
func decodeSmgrBody(rec *Record) (Body, error) {
	switch rec.RmgrInfo() {
	case XLogSmgrCreate:
		return decodeBodyInto(rec, &SmgrCreate{})
	case XLogSmgrTruncate:
		return decodeBodyInto(rec, &SmgrTruncate{})
	}
	return nil, errorf(rec.LSN, KindUnsupported, "storage record: unknown info 0x%02X", rec.Header.Info)
}
