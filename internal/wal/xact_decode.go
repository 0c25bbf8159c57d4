package wal

// decodableBody is a record body that parses itself from a record.
type decodableBody interface {
	Body
	Decode(rec *Record) error
}

// decodeBodyInto runs body.Decode and returns body, or nil and the error.
func decodeBodyInto(rec *Record, body decodableBody) (Body, error) {
	if err := body.Decode(rec); err != nil {
		return nil, err
	}
	return body, nil
}

// decodeXactBody decodes a Transaction-rmgr record body.
func decodeXactBody(rec *Record) (Body, error) {
	switch XactOpcode(rec.Header.Info) {
	case XLogXactCommit, XLogXactCommitPrepared:
		return decodeBodyInto(rec, &XactCommit{})
	case XLogXactAbort, XLogXactAbortPrepared:
		return decodeBodyInto(rec, &XactAbort{})
	case XLogXactPrepare:
		return decodeBodyInto(rec, &XactPrepare{})
	case XLogXactAssignment:
		return decodeBodyInto(rec, &XactAssignment{})
	case XLogXactInvalidations:
		return decodeBodyInto(rec, &XactInvalidations{})
	}
	return nil, errorf(rec.LSN, KindUnsupported, "transaction record: unknown info 0x%02X", rec.Header.Info)
}
