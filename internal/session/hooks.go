package session

// Hooks are called at exact points of a running session so crash drills can
// stop the process there (a test child SIGKILLs itself). They are nil in
// production: nothing in walshadow sets them.
var Hooks struct {
	// AfterCapture runs once a catalog boundary's shapes are durable in the
	// descriptor log, before the boundary's transaction is emitted (so
	// before any output can have acknowledged it).
	AfterCapture func()
	// AfterSpill runs once the transaction buffer has spilled a
	// transaction to disk (the transaction is still open or not yet
	// emitted).
	AfterSpill func()
	// AfterSpoolAppend runs once received WAL is appended to the spool,
	// before it is synced.
	AfterSpoolAppend func()
	// AfterSpoolTrim runs once the spool removed segments, before it
	// recorded its new start.
	AfterSpoolTrim func()
	// AfterSpoolRead runs once a read of the spool went to the pump (the
	// filter, the shadow's feed and the transaction buffer took it),
	// before the next read.
	AfterSpoolRead func()
}
