package msg

// Metadata keys of a WAL record message (pg_physical_wal's output).
const (
	// KeyRecord holds the *Record.
	KeyRecord = "walshadow_wal_record"
	// KeyRecords holds the *Records of a record batch message.
	KeyRecords = "walshadow_wal_records"

	KeyWALLSN        = "wal_lsn"
	KeyWALNextLSN    = "wal_next_lsn"
	KeyWALXID        = "wal_xid"
	KeyWALTopXID     = "wal_top_xid"
	KeyWALRmgr       = "wal_rmgr"
	KeyWALRecordType = "wal_record_type"
	KeyPGMajor       = "pg_major"
	KeyDeferred      = "walshadow_defer_catalog_decode"
	KeyBoundary      = "walshadow_boundary"
	KeyCommitNextLSN = "walshadow_commit_next_lsn"
	KeyTopXID        = "walshadow_top_xid"
	KeyTxLast        = "walshadow_tx_last"
	KeyTxFirstLSN    = "walshadow_tx_first_lsn"
	KeySeq           = "walshadow_seq"
	KeyEpoch         = "walshadow_epoch"
)

// Metadata keys of a change message (walshadow_decode's output). The
// commit LSN and commit time keys are shared with the record message.
const (
	// KeyChange holds the *Change.
	KeyChange = "walshadow_change"
	// KeyChanges holds the *Changes of a change batch message.
	KeyChanges = "walshadow_changes"

	KeyOperation      = "walshadow_operation"
	KeyEvent          = "walshadow_event"
	KeySchema         = "walshadow_schema"
	KeyTable          = "walshadow_table"
	KeyRelationOid    = "walshadow_relation_oid"
	KeyLSN            = "walshadow_lsn"
	KeyCommitLSN      = "walshadow_commit_lsn"
	KeyXID            = "walshadow_xid"
	KeyCommitTime     = "walshadow_commit_time"
	KeyDescVersion    = "walshadow_descriptor_version"
	KeyKey            = "walshadow_key"
	KeyUnchangedToast = "walshadow_unchanged_toast"
	KeyKeyChanged     = "walshadow_key_changed"
	KeyRecordIndex    = "walshadow_record_index"
	// KeyTID is the tuple a row change leaves live, "block:offset" (see
	// AppendTID): the inserted tuple, the new version of an update, the
	// deleted tuple (for the delete half of a key change, the old version).
	KeyTID = "walshadow_tid"
	// KeyOldTID is the version an update replaced (updates only).
	KeyOldTID = "walshadow_old_tid"
	// KeyFilenode is the relfilenode of the heap the change was written
	// to, in decimal: the table's storage generation (TRUNCATE, VACUUM
	// FULL, CLUSTER and rewrites start a new one).
	KeyFilenode = "walshadow_filenode"
	// KeyRewritten marks a changed event ("true") whose transaction gave
	// the relation a new file and wrote every row the relation holds at
	// its commit into it as row changes of that transaction (ALTER
	// TABLE's rewrite; a TRUNCATE's empty file): a consumer that empties
	// the table at the event and applies the transaction's rows holds the
	// table, whatever the rewrite did to the values (USING). Its
	// KeyFilenode is the new file's relfilenode.
	KeyRewritten = "walshadow_rewritten"
	// KeyError is why a table failed (OperationFail only): it names the
	// LSN, the relation and the column at fault.
	KeyError = "walshadow_error"
)

// Values of KeyOperation and KeyEvent.
const (
	OperationInsert   = "insert"
	OperationUpdate   = "update"
	OperationDelete   = "delete"
	OperationTruncate = "truncate"
	OperationSchema   = "schema"
	OperationFail     = "fail"
	EventTruncate     = "truncate"
)
