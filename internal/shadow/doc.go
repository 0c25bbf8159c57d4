// Package shadow builds, configures and supervises the shadow: an unmodified
// PostgreSQL of the source's major version, running as a hot standby whose
// primary is walshadow, holding the source's catalogs and nothing else.
//
// # Bootstrap
//
// Bootstrap takes one BASE_BACKUP of the source (PostgreSQL 15+ protocol:
// a single COPY stream of 'n'ew-archive / 'd'ata / 'p'rogress messages,
// spoken by backupProtocol, a pure state machine) and streams the tar
// archives through a classifier:
//
//	kept        PG_VERSION, backup_label, global/ (shared catalogs, pg_control,
//	            relation map), pg_xact, pg_multixact, pg_twophase,
//	            pg_commit_ts, base/<db>/{PG_VERSION,pg_filenode.map}, and every
//	            fork and segment of a relation whose filenode is below 16384
//	            or is a relocated catalog (VACUUM FULL/CLUSTER moved it above)
//	directories every directory (the layout initdb makes, empty where the
//	            backup sends no content: pg_replslot, pg_subtrans, ...)
//	discarded   user relation files (their bytes are read off the wire and
//	            dropped), statistics, logical decoding state, configuration
//	            files (Materialize writes its own), tablespace_map
//	pg_wal      the segments of the backup window, through TransformWAL
//
// Relocated catalogs are found before the backup by asking every connectable
// database for pg_relation_filenode of its relations with OID < 16384. DDL on
// the source during Bootstrap is therefore not supported: a catalog relocated
// after that query would be dropped as user data.
//
// Tablespaces other than pg_default and pg_global become in-place
// directories pg_tblspc/<oid> (allow_in_place_tablespaces=on), so the shadow
// never points at, let alone writes into, the source's tablespace locations.
//
// The window's WAL must be filtered: with TransformWAL unset it is replayed
// as is, and while ordinary DML replays (each first touch of a page after the
// backup checkpoint carries a full-page image, which also recreates that user
// page on the shadow's disk), a VACUUM that sets pages all-visible during the
// window logs XLOG_HEAP2_VISIBLE without an image of the heap page, and the
// shadow PANICs with "WAL contains references to invalid pages". Production
// bootstraps plug the filter (user records to XLOG_NOOP) in as TransformWAL.
//
// Markers: walshadow.bootstrap_incomplete is written before the first byte,
// walshadow.bootstrap_complete (the BootstrapResult as JSON) only after every
// file and directory is fsynced. An interrupted bootstrap (the incomplete
// marker without the complete one: walshadow's own directory) is emptied
// and done again at the next start; a directory with other content and no
// marker is refused, naming the directory and the remedy (delete it); a
// completed one is resumed, never rebuilt.
//
// # Configuration and supervision
//
// Materialize rewrites postgresql.conf, postgresql.auto.conf, pg_hba.conf
// (local trust only), pg_ident.conf and standby.signal at every boot; the
// GUC floors come from pg_controldata of the shadow itself. Shadow starts the
// server with pg_ctl as the OS user (runuser when walshadow is root),
// restarts it when it dies (Supervise), resumes replay paused for a raised
// floor so that the restart picks the new floor up, and answers
// pg_last_wal_replay_lsn() over its unix socket.
package shadow
