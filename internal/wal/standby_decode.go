package wal

// decodeStandbyBody decodes a Standby-rmgr record body.
func decodeStandbyBody(rec *Record) (Body, error) {
	switch rec.RmgrInfo() {
	case XLogStandbyLock:
		return decodeBodyInto(rec, &StandbyLocks{})
	case XLogRunningXacts:
		return decodeBodyInto(rec, &RunningXacts{})
	case XLogInvalidations:
		return decodeBodyInto(rec, &StandbyInvalidations{})
	}
	return nil, errorf(rec.LSN, KindUnsupported, "standby record: unknown info 0x%02X", rec.Header.Info)
}
