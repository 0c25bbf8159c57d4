package shadow

import (
	"bytes"
	"os"
	"path"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

func FuzzParseControlData(f *testing.F) {
	if b, err := os.ReadFile("testdata/pg_controldata_15.txt"); err == nil {
		f.Add(string(b))
	}
	f.Add("max_connections setting: 5\n")
	f.Fuzz(func(t *testing.T, s string) {
		cd, err := ParseControlData(s)
		if err == nil && (cd.Floors.MaxConnections < 0 || cd.WALSegmentSize < 0) {
			t.Fatalf("negative values accepted: %+v", cd)
		}
	})
}

func FuzzClassifyEntry(f *testing.F) {
	for _, s := range []string{"base/5/16500.1", "base/5/1259_fsm", "global/pg_control", "pg_wal/000000010000000000000007",
		"PG_15_202209061/5/16600", "pg_tblspc/16390", "../x", "./PG_VERSION", "base/5/16384_init"} {
		f.Add(uint32(0), s, uint8(0))
		f.Add(uint32(16390), s, uint8(2))
	}
	relocated := CatalogSet{{Spc: DefaultTablespaceOID, DB: 5, Filenode: 16500}: {}, {Spc: 16390, DB: 5, Filenode: 16600}: {}}
	f.Fuzz(func(t *testing.T, spc uint32, name string, kind uint8) {
		action, dest, err := classifyEntry(archiveTablespace(spc), name, entryKind(kind%3), relocated)
		if err != nil {
			return
		}
		if dest == "" || path.IsAbs(dest) || dest != path.Clean(dest) || strings.HasPrefix(dest, "../") || dest == ".." {
			t.Fatalf("%q -> unsafe destination %q", name, dest)
		}
		if spc != 0 && !strings.HasPrefix(dest, "pg_tblspc/"+strconv.FormatUint(uint64(spc), 10)+"/") {
			t.Fatalf("tablespace %d entry %q lands at %q", spc, name, dest)
		}
		if action != actionKeep {
			return
		}
		// A kept file in a database directory is never a user relation.
		parts := strings.Split(dest, "/")
		var db, file string
		relSpc := uint32(DefaultTablespaceOID)
		switch {
		case parts[0] == "base" && len(parts) == 3:
			db, file = parts[1], parts[2]
		case parts[0] == "pg_tblspc" && len(parts) == 5:
			db, file, relSpc = parts[3], parts[4], spc
		default:
			return
		}
		if fn, ok := parseRelationFileName(file); ok && fn >= FirstNormalObjectID {
			d, _ := strconv.ParseUint(db, 10, 32)
			if !relocated.Has(RelFile{Spc: relSpc, DB: uint32(d), Filenode: fn}) {
				t.Fatalf("user relation file %q kept", dest)
			}
		}
	})
}

// FuzzBackupProtocol drives the COPY stream part of the state machine with
// arbitrary CopyData payloads (separated by 0xFF in the input).
func FuzzBackupProtocol(f *testing.F) {
	f.Add([]byte("nbase.tar\x00\x00\xffdabc\xffp\x00\x00\x00\x00\x00\x00\x00\x01\xffm\xffdxyz"))
	f.Add([]byte("n16390.tar\x00/ts\x00\xffd\xff"))
	f.Add([]byte("dx"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var p backupProtocol
		head := append(positionResult("0/1000028"), tablespaceResult([][]byte{[]byte("16390"), []byte("/ts"), nil}, [][]byte{nil, nil, nil})...)
		head = append(head, &pgproto3.CopyOutResponse{})
		for _, m := range head {
			if _, err := p.handle(m); err != nil {
				t.Fatal(err)
			}
		}
		for _, payload := range bytes.Split(in, []byte{0xFF}) {
			ev, err := p.handle(&pgproto3.CopyData{Data: payload})
			if err != nil {
				return
			}
			switch ev.kind {
			case eventData:
				if !p.inArchive || len(ev.data) != len(payload)-1 {
					t.Fatalf("data event outside an archive or of the wrong length")
				}
			case eventArchive:
				if _, err := p.archiveTablespaceOf(ev.archive); err == nil && ev.archive.name != "base.tar" && ev.archive.name != "16390.tar" {
					t.Fatalf("archive %q accepted", ev.archive.name)
				}
			}
		}
		if _, err := p.handle(&pgproto3.CopyDone{}); err == nil && p.archives == 0 {
			t.Fatal("COPY stream without archives accepted")
		}
	})
}
