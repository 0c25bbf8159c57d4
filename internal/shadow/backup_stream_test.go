package shadow

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/walshadow/walshadow/internal/wal"
)

// scriptedReceiver replays server messages, as a PgConn would receive them.
type scriptedReceiver struct{ msgs []pgproto3.BackendMessage }

func (r *scriptedReceiver) ReceiveMessage(context.Context) (pgproto3.BackendMessage, error) {
	if len(r.msgs) == 0 {
		return nil, io.ErrUnexpectedEOF
	}
	m := r.msgs[0]
	r.msgs = r.msgs[1:]
	return m, nil
}

func positionResult(lsn string) []pgproto3.BackendMessage {
	return []pgproto3.BackendMessage{
		&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{Name: []byte("recptr")}, {Name: []byte("tli")}}},
		&pgproto3.DataRow{Values: [][]byte{[]byte(lsn), []byte("1")}},
		&pgproto3.CommandComplete{CommandTag: []byte("SELECT")},
	}
}

func tablespaceResult(rows ...[][]byte) []pgproto3.BackendMessage {
	msgs := []pgproto3.BackendMessage{&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{
		{Name: []byte("spcoid")}, {Name: []byte("spclocation")}, {Name: []byte("size")}}}}
	for _, r := range rows {
		msgs = append(msgs, &pgproto3.DataRow{Values: r})
	}
	return append(msgs, &pgproto3.CommandComplete{CommandTag: []byte("SELECT")})
}

func copyData(kind byte, payload []byte) *pgproto3.CopyData {
	return &pgproto3.CopyData{Data: append([]byte{kind}, payload...)}
}

// archiveMessages announces an archive and sends its bytes in chunks of
// random size, with progress messages between them.
func archiveMessages(rng *rand.Rand, name, location string, data []byte) []pgproto3.BackendMessage {
	msgs := []pgproto3.BackendMessage{copyData('n', []byte(name+"\x00"+location+"\x00"))}
	for len(data) > 0 {
		n := min(len(data), 1+rng.Intn(70000))
		msgs = append(msgs, copyData('d', data[:n]))
		data = data[n:]
		if rng.Intn(4) == 0 {
			msgs = append(msgs, copyData('p', binary.BigEndian.AppendUint64(nil, uint64(rng.Int63()))))
		}
	}
	return msgs
}

type tarEntry struct {
	name, link string
	typ        byte
	body       []byte
}

func buildTar(t *testing.T, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o600, Size: int64(len(e.body)), Linkname: e.link}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write(e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func dir(name string) tarEntry { return tarEntry{name: name, typ: tar.TypeDir} }
func file(name string, body string) tarEntry {
	return tarEntry{name: name, typ: tar.TypeReg, body: []byte(body)}
}
func symlink(name, target string) tarEntry {
	return tarEntry{name: name, typ: tar.TypeSymlink, link: target}
}

const testSegment = "000000010000000000000007"

func testBackupArchives(t *testing.T) (base, ts []byte) {
	seg := make([]byte, 1<<20)
	binary.LittleEndian.PutUint16(seg, 0xD110)
	base = buildTar(t, []tarEntry{
		file("backup_label", "START WAL LOCATION: 0/7000028\n"),
		file("PG_VERSION", "15\n"),
		file("postgresql.conf", "shared_buffers = 1GB\n"),
		file("pg_hba.conf", "host all all 0.0.0.0/0 trust\n"),
		file("tablespace_map", "16390 /ts\n"),
		file("current_logfiles", "stderr log/x\n"),
		dir("global"), file("global/1262", "pg_database"), file("global/pg_filenode.map", "map"),
		dir("base"), dir("base/1"), file("base/1/PG_VERSION", "15\n"), file("base/1/pg_filenode.map", "map1"),
		file("base/1/1259", "pg_class"), file("base/1/1259_fsm", "fsm"), file("base/1/2608.1", "pg_depend seg 1"),
		file("base/1/16384", strings.Repeat("user", 5000)), file("base/1/16500_vm", "user vm"),
		file("base/1/16390.1", "relocated catalog segment"), file("base/1/16390_init", "relocated init fork"),
		dir("base/5"), file("base/5/16390", "user in db 5, same filenode as a relocated catalog of db 1"),
		dir("pg_tblspc"), symlink("pg_tblspc/16390", "/ts"),
		dir("pg_xact"), file("pg_xact/0000", "clog"),
		dir("pg_multixact"), dir("pg_multixact/members"), file("pg_multixact/members/0000", "m"),
		dir("pg_twophase"), file("pg_twophase/000002DF", "2pc state"),
		dir("pg_stat"), file("pg_stat/pgstat.stat", "stats"),
		dir("pg_logical"), dir("pg_logical/snapshots"), file("pg_logical/replorigin_checkpoint", "x"),
		dir("pg_replslot"), dir("pg_subtrans"),
		file("global/pg_control", strings.Repeat("c", 8192)),
		dir("pg_wal"), dir("pg_wal/archive_status"),
		{name: "pg_wal/" + testSegment, typ: tar.TypeReg, body: seg},
		file("pg_wal/00000002.history", "1\t0/5000000\tno recovery target specified\n"),
		file("pg_wal/archive_status/"+testSegment+".done", ""),
	})
	ts = buildTar(t, []tarEntry{
		dir("PG_15_202209061"), dir("PG_15_202209061/5"),
		file("PG_15_202209061/5/PG_VERSION", "15\n"),
		file("PG_15_202209061/5/1259", "pg_class of db 5 in ts"),
		file("PG_15_202209061/5/16400", "user in ts"),
		file("PG_15_202209061/5/16420", "relocated catalog in ts"),
	})
	return base, ts
}

func TestBackupStreamExtractsCatalogsOnly(t *testing.T) {
	owner, err := lookupOSUser("")
	if err != nil {
		t.Skip(err)
	}
	rng := rand.New(rand.NewSource(1))
	base, ts := testBackupArchives(t)
	var msgs []pgproto3.BackendMessage
	msgs = append(msgs, &pgproto3.NoticeResponse{Severity: "NOTICE", Message: "hello"})
	msgs = append(msgs, positionResult("0/7000028")...)
	msgs = append(msgs, tablespaceResult(
		[][]byte{[]byte("16390"), []byte("/ts"), nil},
		[][]byte{nil, nil, nil})...)
	msgs = append(msgs, &pgproto3.CopyOutResponse{})
	msgs = append(msgs, archiveMessages(rng, "16390.tar", "/ts", ts)...)
	msgs = append(msgs, archiveMessages(rng, "base.tar", "", base)...)
	msgs = append(msgs, &pgproto3.CopyDone{})
	msgs = append(msgs, positionResult("0/7000100")...)
	msgs = append(msgs, &pgproto3.CommandComplete{CommandTag: []byte("BASE_BACKUP")}, &pgproto3.ReadyForQuery{TxStatus: 'I'})

	root := filepath.Join(t.TempDir(), "data")
	if err := createDataDir(root, owner); err != nil {
		t.Fatal(err)
	}
	var transformed []string
	transform := func(name string, data []byte) error {
		transformed = append(transformed, name)
		if len(data) != 1<<20 || binary.LittleEndian.Uint16(data) != 0xD110 {
			t.Errorf("TransformWAL got %d bytes starting %x", len(data), data[:2])
		}
		data[100] = 0xAB // rewritten bytes must be what lands on disk
		return nil
	}
	relocated := CatalogSet{{Spc: DefaultTablespaceOID, DB: 1, Filenode: 16390}: {}, {Spc: 16390, DB: 5, Filenode: 16420}: {}}
	stream, err := newBackupStream(context.Background(), &scriptedReceiver{msgs: msgs}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	x := newExtractor(root, owner, relocated, transform, slog.New(slog.DiscardHandler))
	if err := receiveArchives(stream, x); err != nil {
		t.Fatal(err)
	}
	p := stream.proto
	if p.Start != wal.LSN(0x7000028) || p.End != wal.LSN(0x7000100) || p.StartTLI != 1 || p.EndTLI != 1 {
		t.Errorf("positions %s/%d .. %s/%d", p.Start, p.StartTLI, p.End, p.EndTLI)
	}
	if len(p.Tablespaces) != 1 || p.Tablespaces[0] != (BackupTablespace{OID: 16390, Location: "/ts"}) {
		t.Errorf("tablespaces %+v", p.Tablespaces)
	}
	if len(transformed) != 1 || transformed[0] != testSegment || x.lastWAL != testSegment {
		t.Errorf("TransformWAL saw %v", transformed)
	}

	kept := []string{
		"backup_label", "PG_VERSION", "global/1262", "global/pg_filenode.map", "global/pg_control",
		"base/1/PG_VERSION", "base/1/pg_filenode.map", "base/1/1259", "base/1/1259_fsm", "base/1/2608.1",
		"base/1/16390.1", "base/1/16390_init",
		"pg_xact/0000", "pg_multixact/members/0000", "pg_twophase/000002DF",
		"pg_wal/" + testSegment, "pg_wal/00000002.history",
		"pg_tblspc/16390/PG_15_202209061/5/PG_VERSION", "pg_tblspc/16390/PG_15_202209061/5/1259",
		"pg_tblspc/16390/PG_15_202209061/5/16420",
	}
	for _, f := range kept {
		if _, err := os.Lstat(filepath.Join(root, f)); err != nil {
			t.Errorf("kept file: %v", err)
		}
	}
	gone := []string{
		"postgresql.conf", "pg_hba.conf", "tablespace_map", "current_logfiles",
		"base/1/16384", "base/1/16500_vm", "base/5/16390", "pg_stat/pgstat.stat",
		"pg_logical/replorigin_checkpoint", "pg_wal/archive_status/" + testSegment + ".done",
		"pg_tblspc/16390/PG_15_202209061/5/16400",
	}
	for _, f := range gone {
		if _, err := os.Lstat(filepath.Join(root, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s should not exist: %v", f, err)
		}
	}
	for _, d := range []string{"pg_replslot", "pg_subtrans", "pg_logical/snapshots", "pg_stat", "pg_wal/archive_status", "pg_tblspc/16390"} {
		fi, err := os.Lstat(filepath.Join(root, d))
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("directory %s: %v %v", d, fi, err)
		}
	}
	seg, err := os.ReadFile(filepath.Join(root, "pg_wal", testSegment))
	if err != nil || len(seg) != 1<<20 || seg[100] != 0xAB {
		t.Errorf("WAL segment on disk is not the transformed one (%d bytes, %v)", len(seg), err)
	}
	if s := x.stats; s.WALSegments != 1 || s.KeptFiles != len(kept) || s.DiscardedFiles != len(gone) || s.DiscardedBytes < 20000 {
		t.Errorf("stats %+v (kept %d, gone %d)", s, len(kept), len(gone))
	}
}

// TestBackupStreamRefusesIncompleteBackups checks that a data directory
// missing pg_control (or WAL) is not declared complete.
func TestBackupStreamRefusesIncompleteBackups(t *testing.T) {
	owner, err := lookupOSUser("")
	if err != nil {
		t.Skip(err)
	}
	base := buildTar(t, []tarEntry{file("PG_VERSION", "15\n"), file("backup_label", "x"), dir("global"), file("global/pg_filenode.map", "m")})
	var msgs []pgproto3.BackendMessage
	msgs = append(msgs, positionResult("0/7000028")...)
	msgs = append(msgs, tablespaceResult([][]byte{nil, nil, nil})...)
	msgs = append(msgs, &pgproto3.CopyOutResponse{})
	msgs = append(msgs, archiveMessages(rand.New(rand.NewSource(2)), "base.tar", "", base)...)
	msgs = append(msgs, &pgproto3.CopyDone{})
	msgs = append(msgs, positionResult("0/7000100")...)
	msgs = append(msgs, &pgproto3.CommandComplete{}, &pgproto3.ReadyForQuery{})
	root := filepath.Join(t.TempDir(), "data")
	if err := createDataDir(root, owner); err != nil {
		t.Fatal(err)
	}
	stream, err := newBackupStream(context.Background(), &scriptedReceiver{msgs: msgs}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	err = receiveArchives(stream, newExtractor(root, owner, nil, nil, slog.New(slog.DiscardHandler)))
	if err == nil || !strings.Contains(err.Error(), "global/pg_control") || !strings.Contains(err.Error(), "pg_wal segments") {
		t.Fatalf("want an error naming pg_control and the WAL, got %v", err)
	}
}

func TestBackupStreamRefusesEscapingEntries(t *testing.T) {
	owner, err := lookupOSUser("")
	if err != nil {
		t.Skip(err)
	}
	for _, name := range []string{"../etc/passwd", "global/../../x", "/etc/passwd"} {
		base := buildTar(t, []tarEntry{file(name, "x")})
		root := filepath.Join(t.TempDir(), "data")
		if err := createDataDir(root, owner); err != nil {
			t.Fatal(err)
		}
		x := newExtractor(root, owner, nil, nil, slog.New(slog.DiscardHandler))
		if err := x.archive(bytes.NewReader(base), 0, "base.tar"); err == nil {
			t.Errorf("%q: extracted", name)
		}
	}
}

func TestBackupProtocolRejectsMalformedExchanges(t *testing.T) {
	head := func() []pgproto3.BackendMessage {
		var m []pgproto3.BackendMessage
		m = append(m, positionResult("0/7000028")...)
		m = append(m, tablespaceResult([][]byte{nil, nil, nil})...)
		return append(m, &pgproto3.CopyOutResponse{})
	}
	cases := map[string][]pgproto3.BackendMessage{
		"error response": {&pgproto3.ErrorResponse{Severity: "ERROR", Code: "42501", Message: "permission denied"}},
		"wrong columns":  {&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{Name: []byte("lsn")}, {Name: []byte("tli")}}}},
		"bad lsn": {&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{Name: []byte("recptr")}, {Name: []byte("tli")}}},
			&pgproto3.DataRow{Values: [][]byte{[]byte("zz"), []byte("1")}}},
		"no row":                 {&pgproto3.CommandComplete{}},
		"data before archive":    append(head(), copyData('d', []byte("x"))),
		"unknown copy message":   append(head(), copyData('z', nil)),
		"empty copy message":     append(head(), &pgproto3.CopyData{}),
		"short progress":         append(head(), copyData('p', []byte{1, 2})),
		"unterminated archive":   append(head(), copyData('n', []byte("base.tar"))),
		"archive trailing bytes": append(head(), copyData('n', []byte("base.tar\x00\x00junk"))),
		"copy done, no archive":  append(head(), &pgproto3.CopyDone{}),
		"query result in copy":   append(head(), &pgproto3.DataRow{}),
		"unlisted tablespace":    append(head(), copyData('n', []byte("16390.tar\x00/ts\x00"))),
		"truncated":              head(),
	}
	for name, msgs := range cases {
		t.Run(name, func(t *testing.T) {
			owner, err := lookupOSUser("")
			if err != nil {
				t.Skip(err)
			}
			stream, err := newBackupStream(context.Background(), &scriptedReceiver{msgs: msgs}, slog.New(slog.DiscardHandler))
			if err == nil {
				root := filepath.Join(t.TempDir(), "data")
				if err := createDataDir(root, owner); err != nil {
					t.Fatal(err)
				}
				err = receiveArchives(stream, newExtractor(root, owner, nil, nil, slog.New(slog.DiscardHandler)))
			}
			if err == nil {
				t.Fatal("accepted")
			}
			t.Log(err)
		})
	}
}
