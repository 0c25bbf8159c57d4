package pagewalk

import (
	"errors"
	"fmt"

	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/wal"
)

// Special transaction ids (access/transam.h).
const (
	invalidXid   = 0
	bootstrapXid = 1
	frozenXid    = 2
)

// heapLockMask is HEAP_LOCK_MASK: HEAP_XMAX_SHR_LOCK | EXCL | KEYSHR.
const heapLockMask = wal.HeapXmaxExclLock | wal.HeapXmaxKeyshrLock

// statusSource answers what hint bits do not.
type statusSource interface {
	Status(xid uint32) (XidStatus, error)
	Updater(multi uint32) (xid uint32, ok bool, err error)
}

// errNeedStatus is what the walk's source answers before pg_xact and
// pg_multixact have been read: the tuple is spooled and decided at the end.
var errNeedStatus = errors.New("pagewalk: transaction status not read yet")

// deferredSource is the source while the tar is still being read.
type deferredSource struct{}

func (deferredSource) Status(uint32) (XidStatus, error)     { return 0, errNeedStatus }
func (deferredSource) Updater(uint32) (uint32, bool, error) { return 0, false, errNeedStatus }

// backupSource is the source once the archive has been read.
type backupSource struct {
	clog  *Clog
	multi *Multixacts
}

func (s backupSource) Status(xid uint32) (XidStatus, error) { return s.clog.Status(xid) }
func (s backupSource) Updater(multi uint32) (uint32, bool, error) {
	return s.multi.Updater(multi)
}

// Visible decides whether a tuple is part of the backup's committed state:
// its inserter committed, and its deleter or updater, if any, did not.
// Hint bits decide without src where they can; a transaction that is in
// progress or only sub-committed (pg_subtrans is not in a backup) counts as
// not committed. Errors from src (including errNeedStatus) come back as
// they are.
func Visible(h decode.PageTupleHeader, src statusSource) (bool, error) {
	ok, err := xminCommitted(h, src)
	if !ok || err != nil {
		return false, err
	}
	deleted, err := xmaxCommitted(h, src)
	return !deleted, err
}

func xminCommitted(h decode.PageTupleHeader, src statusSource) (bool, error) {
	const frozen = wal.HeapXminCommitted | wal.HeapXminInvalid
	switch {
	case h.Infomask&frozen == frozen, h.Infomask&wal.HeapXminCommitted != 0:
		return true, nil
	case h.Infomask&wal.HeapXminInvalid != 0:
		return false, nil
	case h.Infomask&(wal.HeapMovedOff|wal.HeapMovedIn) != 0:
		// Moved by a pre-9.0 VACUUM FULL: visibility hangs on t_xvac, which
		// this gate does not read.
		return false, fmt.Errorf("tuple moved by a pre-9.0 VACUUM FULL (infomask %#04x) without a commit hint: not supported", h.Infomask)
	case h.Xmin == invalidXid: // a super-deleted speculative insertion
		return false, nil
	case h.Xmin == bootstrapXid || h.Xmin == frozenXid:
		return true, nil
	}
	st, err := src.Status(h.Xmin)
	if err != nil {
		return false, wrapStatus(err, "xmin", h.Xmin)
	}
	return st == XidCommitted, nil
}

// xmaxCommitted reports whether the tuple was deleted or updated away by a
// committed transaction.
func xmaxCommitted(h decode.PageTupleHeader, src statusSource) (bool, error) {
	if h.Infomask&wal.HeapXmaxInvalid != 0 || h.Xmax == invalidXid {
		return false, nil
	}
	// HEAP_XMAX_IS_LOCKED_ONLY, including the pre-9.3 pattern of an
	// exclusive lock without the lock-only bit.
	if h.Infomask&wal.HeapXmaxLockOnly != 0 || h.Infomask&(wal.HeapXmaxIsMulti|heapLockMask) == wal.HeapXmaxExclLock {
		return false, nil
	}
	xmax := h.Xmax
	if h.Infomask&wal.HeapXmaxIsMulti != 0 {
		updater, ok, err := src.Updater(h.Xmax)
		if err != nil {
			return false, wrapStatus(err, "xmax multixact", h.Xmax)
		}
		if !ok {
			return false, nil
		}
		xmax = updater
	} else if h.Infomask&wal.HeapXmaxCommitted != 0 {
		return true, nil
	}
	if xmax == bootstrapXid || xmax == frozenXid {
		return true, nil
	}
	st, err := src.Status(xmax)
	if err != nil {
		return false, wrapStatus(err, "xmax", xmax)
	}
	return st == XidCommitted, nil
}

func wrapStatus(err error, what string, xid uint32) error {
	if errors.Is(err, errNeedStatus) {
		return err
	}
	return fmt.Errorf("%s %d: %w", what, xid, err)
}
