package wal

import "fmt"

// RmgrID identifies a resource manager (xl_rmid). Ids 0..21 are identical in
// PostgreSQL 15–18 (src/include/access/rmgrlist.h); 128..255 are custom.
type RmgrID uint8

const (
	RmgrXLOG        RmgrID = 0
	RmgrXact        RmgrID = 1
	RmgrSmgr        RmgrID = 2
	RmgrCLOG        RmgrID = 3
	RmgrDatabase    RmgrID = 4
	RmgrTablespace  RmgrID = 5
	RmgrMultiXact   RmgrID = 6
	RmgrRelMap      RmgrID = 7
	RmgrStandby     RmgrID = 8
	RmgrHeap2       RmgrID = 9
	RmgrHeap        RmgrID = 10
	RmgrBtree       RmgrID = 11
	RmgrHash        RmgrID = 12
	RmgrGin         RmgrID = 13
	RmgrGist        RmgrID = 14
	RmgrSequence    RmgrID = 15
	RmgrSPGist      RmgrID = 16
	RmgrBRIN        RmgrID = 17
	RmgrCommitTs    RmgrID = 18
	RmgrReplOrigin  RmgrID = 19
	RmgrGeneric     RmgrID = 20
	RmgrLogicalMsg  RmgrID = 21
	RmgrMaxBuiltin  RmgrID = 21
	RmgrMinCustomID RmgrID = 128
)

// rmgrNames are the names pg_waldump prints (RmgrTable[].rm_name).
var rmgrNames = [...]string{
	"XLOG", "Transaction", "Storage", "CLOG", "Database", "Tablespace",
	"MultiXact", "RelMap", "Standby", "Heap2", "Heap", "Btree", "Hash",
	"Gin", "Gist", "Sequence", "SPGist", "BRIN", "CommitTs",
	"ReplicationOrigin", "Generic", "LogicalMessage",
}

// String returns pg_waldump's name for the resource manager.
func (id RmgrID) String() string {
	if int(id) < len(rmgrNames) {
		return rmgrNames[id]
	}
	if id >= RmgrMinCustomID {
		return fmt.Sprintf("custom%03d", uint8(id))
	}
	return fmt.Sprintf("rmgr%d", uint8(id))
}

// Valid reports whether a record with this rmid can legitimately appear in WAL.
func (id RmgrID) Valid() bool { return id <= RmgrMaxBuiltin || id >= RmgrMinCustomID }
