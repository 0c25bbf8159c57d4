package wal

import "encoding/binary"

// Standby rmgr opcodes (storage/standbydefs.h): xl_info & 0xF0.
const (
	XLogStandbyLock   = 0x00
	XLogRunningXacts  = 0x10
	XLogInvalidations = 0x20
)

// standbyLockSize is sizeof(xl_standby_lock).
const standbyLockSize = 12

// StandbyLock is xl_standby_lock: an AccessExclusiveLock on a relation.
type StandbyLock struct {
	XID    uint32
	DbOid  uint32
	RelOid uint32
}

// StandbyLocks is a Standby LOCK record (xl_standby_locks): AccessExclusive
// locks taken by transactions, replayed so standbys block conflicting reads.
// Locks are decoded on access from bytes aliasing the record.
type StandbyLocks struct {
	b []byte
}

func (*StandbyLocks) walBody() {}

// Decode parses rec's main data, reusing dst.
func (dst *StandbyLocks) Decode(rec *Record) error {
	*dst = StandbyLocks{}
	c := newMainDataCursor(rec, "standby lock")
	b, err := c.countedArray(standbyLockSize, "locks")
	if err != nil {
		return err
	}
	dst.b = b
	return nil
}

// Len returns the number of locks.
func (src *StandbyLocks) Len() int { return len(src.b) / standbyLockSize }

// At returns the i-th lock; it panics if i is out of range.
func (src *StandbyLocks) At(i int) StandbyLock {
	p := src.b[i*standbyLockSize : (i+1)*standbyLockSize]
	return StandbyLock{
		XID:    binary.LittleEndian.Uint32(p[0:]),
		DbOid:  binary.LittleEndian.Uint32(p[4:]),
		RelOid: binary.LittleEndian.Uint32(p[8:]),
	}
}
