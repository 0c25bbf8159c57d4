package wal

import (
	"errors"
	"fmt"
)

// ErrorKind classifies a decoding failure so callers can tell damage apart
// from the ordinary end of the WAL that has been written so far.
type ErrorKind uint8

const (
	// KindCorrupt: bytes that cannot be valid WAL (bad magic, bad lengths,
	// broken xl_prev chain, malformed block headers, bad body).
	KindCorrupt ErrorKind = iota + 1
	// KindCRC: the record is framed correctly but its CRC-32C does not match.
	// The reader has already stepped past it.
	KindCRC
	// KindEndOfWAL: what follows is not (yet) WAL: zeroes where a record
	// header should be, or a recycled page from an older segment. This is how
	// pg_waldump and recovery find the end of the written WAL.
	KindEndOfWAL
	// KindUnsupported: a valid layout this decoder does not handle.
	KindUnsupported
)

func (k ErrorKind) String() string {
	switch k {
	case KindCorrupt:
		return "corrupt"
	case KindCRC:
		return "crc mismatch"
	case KindEndOfWAL:
		return "end of WAL"
	case KindUnsupported:
		return "unsupported"
	}
	return "unknown"
}

// Error is a decoding error at a WAL position. Every error the package returns
// for bad input is an *Error naming the LSN.
type Error struct {
	LSN  LSN
	Kind ErrorKind
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("wal: %s at %s: %s", e.Kind, e.LSN, e.Msg)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

func errorf(lsn LSN, kind ErrorKind, format string, args ...any) *Error {
	return &Error{LSN: lsn, Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// IsKind reports whether err is an *Error of the given kind.
func IsKind(err error, kind ErrorKind) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == kind
}

// ErrNeedMore is returned by StreamReader.Next when the bytes pushed so far do
// not yet hold a complete record.
var ErrNeedMore = errors.New("wal: need more bytes")
