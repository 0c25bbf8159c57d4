package shadow

import "testing"

func TestClassifyEntry(t *testing.T) {
	relocated := CatalogSet{
		{Spc: DefaultTablespaceOID, DB: 5, Filenode: 16500}: {},
		{Spc: 16390, DB: 5, Filenode: 16600}:                {},
	}
	cases := []struct {
		spc    archiveTablespace
		name   string
		kind   entryKind
		action entryAction
		dest   string
	}{
		{0, "PG_VERSION", kindFile, actionKeep, "PG_VERSION"},
		{0, "./backup_label", kindFile, actionKeep, "backup_label"},
		{0, "tablespace_map", kindFile, actionDiscard, "tablespace_map"},
		{0, "postgresql.conf", kindFile, actionConfig, "postgresql.conf"},
		{0, "postgresql.auto.conf", kindFile, actionConfig, "postgresql.auto.conf"},
		{0, "pg_hba.conf", kindFile, actionConfig, "pg_hba.conf"},
		{0, "postmaster.opts", kindFile, actionDiscard, "postmaster.opts"},
		{0, "global/pg_control", kindFile, actionKeep, "global/pg_control"},
		{0, "global/16700", kindFile, actionKeep, "global/16700"}, // a shared catalog after VACUUM FULL
		{0, "global/", kindDir, actionDir, "global"},
		{0, "pg_xact/0000", kindFile, actionKeep, "pg_xact/0000"},
		{0, "pg_multixact/offsets/0000", kindFile, actionKeep, "pg_multixact/offsets/0000"},
		{0, "pg_twophase/000002DF", kindFile, actionKeep, "pg_twophase/000002DF"},
		{0, "pg_commit_ts/0000", kindFile, actionKeep, "pg_commit_ts/0000"},
		{0, "pg_stat/pgstat.stat", kindFile, actionDiscard, "pg_stat/pgstat.stat"},
		{0, "pg_logical/replorigin_checkpoint", kindFile, actionDiscard, "pg_logical/replorigin_checkpoint"},
		{0, "pg_replslot/s1/state", kindFile, actionDiscard, "pg_replslot/s1/state"},
		{0, "pg_replslot/", kindDir, actionDir, "pg_replslot"},
		{0, "base/5/PG_VERSION", kindFile, actionKeep, "base/5/PG_VERSION"},
		{0, "base/5/pg_filenode.map", kindFile, actionKeep, "base/5/pg_filenode.map"},
		{0, "base/5/1259", kindFile, actionKeep, "base/5/1259"},
		{0, "base/5/1259_fsm", kindFile, actionKeep, "base/5/1259_fsm"},
		{0, "base/5/1259_vm", kindFile, actionKeep, "base/5/1259_vm"},
		{0, "base/5/2608.3", kindFile, actionKeep, "base/5/2608.3"},
		{0, "base/5/16383", kindFile, actionKeep, "base/5/16383"},
		{0, "base/5/16384", kindFile, actionDiscard, "base/5/16384"},
		{0, "base/5/16384_init", kindFile, actionDiscard, "base/5/16384_init"},
		{0, "base/5/16500", kindFile, actionKeep, "base/5/16500"},
		{0, "base/5/16500.12", kindFile, actionKeep, "base/5/16500.12"},
		{0, "base/5/16500_vm", kindFile, actionKeep, "base/5/16500_vm"},
		{0, "base/6/16500", kindFile, actionDiscard, "base/6/16500"}, // relocated in db 5 only
		{0, "base/5/16600", kindFile, actionDiscard, "base/5/16600"}, // relocated in tablespace 16390 only
		{0, "base/5/t3_16384", kindFile, actionDiscard, "base/5/t3_16384"},
		{0, "base/5/1259_xyz", kindFile, actionDiscard, "base/5/1259_xyz"},
		{0, "base/5/1259.x", kindFile, actionDiscard, "base/5/1259.x"},
		{0, "base/5/01259", kindFile, actionDiscard, "base/5/01259"},
		{0, "base/5/pg_internal.init", kindFile, actionDiscard, "base/5/pg_internal.init"},
		{0, "base/5/", kindDir, actionDir, "base/5"},
		{0, "base/pgsql_tmp/x", kindFile, actionDiscard, "base/pgsql_tmp/x"},
		{0, "pg_wal/000000010000000000000007", kindFile, actionWAL, "pg_wal/000000010000000000000007"},
		{0, "pg_wal/000000010000000000000007.partial", kindFile, actionDiscard, "pg_wal/000000010000000000000007.partial"},
		{0, "pg_wal/00000002.history", kindFile, actionKeep, "pg_wal/00000002.history"},
		{0, "pg_wal/archive_status/000000010000000000000007.done", kindFile, actionDiscard, "pg_wal/archive_status/000000010000000000000007.done"},
		{0, "pg_tblspc/16390", kindSymlink, actionTablespaceDir, "pg_tblspc/16390"},
		{0, "pg_wal", kindSymlink, actionDiscard, "pg_wal"},
		{16390, "PG_15_202209061/", kindDir, actionDir, "pg_tblspc/16390/PG_15_202209061"},
		{16390, "PG_15_202209061/5/1259", kindFile, actionKeep, "pg_tblspc/16390/PG_15_202209061/5/1259"},
		{16390, "PG_15_202209061/5/16600_fsm", kindFile, actionKeep, "pg_tblspc/16390/PG_15_202209061/5/16600_fsm"},
		{16390, "PG_15_202209061/5/16500", kindFile, actionDiscard, "pg_tblspc/16390/PG_15_202209061/5/16500"},
		{16390, "PG_15_202209061/5/PG_VERSION", kindFile, actionKeep, "pg_tblspc/16390/PG_15_202209061/5/PG_VERSION"},
		{16390, "stray", kindFile, actionDiscard, "pg_tblspc/16390/stray"},
	}
	for _, c := range cases {
		action, dest, err := classifyEntry(c.spc, c.name, c.kind, relocated)
		if err != nil {
			t.Errorf("%d %q: %v", c.spc, c.name, err)
			continue
		}
		if action != c.action || dest != c.dest {
			t.Errorf("%d %q: got %v %q, want %v %q", c.spc, c.name, action, dest, c.action, c.dest)
		}
	}
	for _, bad := range []string{"", "/etc/passwd", "../x", "base/../../x", "a/../..", ".", "./", "x\x00y"} {
		if _, _, err := classifyEntry(0, bad, kindFile, nil); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
