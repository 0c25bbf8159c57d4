package wal

import (
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"
)

// xtRelMapFile builds a pg_filenode.map image of the given capacity with a
// valid CRC.
func xtRelMapFile(capacity int, mappings ...RelMapping) []byte {
	b := xtBuf{}.u32(RelMapperFileMagic).i32(int32(len(mappings)))
	for _, m := range mappings {
		b = b.u32(m.MapOid).u32(m.MapFileNode)
	}
	b = b.zeros((capacity - len(mappings)) * 8)
	return b.u32(crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))).u32(0)
}

func TestRelMapUpdate(t *testing.T) {
	file := xtRelMapFile(62, RelMapping{1259, 16426}, RelMapping{1249, 1249})
	if len(file) != 512 {
		t.Fatalf("file %d bytes", len(file))
	}
	main := xtBuf{}.u32(5).u32(1663).i32(512)
	main = append(main, file...)
	body, err := decodeRelMapBody(xtRec(t, RmgrRelMap, XLogRelMapUpdate, 15, main))
	if err != nil {
		t.Fatal(err)
	}
	u := body.(*RelMapUpdate)
	if u.DbOid != 5 || u.TsOid != 1663 || u.NBytes != 512 || len(u.Data) != 512 {
		t.Errorf("%+v", u)
	}
	if u.Map.Magic != RelMapperFileMagic || u.Map.NumMappings != 2 || u.Map.Capacity != 62 || u.Map.Len() != 2 {
		t.Errorf("map %+v", u.Map)
	}
	if got, ok := u.Map.Lookup(1259); !ok || got != 16426 {
		t.Errorf("Lookup(1259) = %d %v", got, ok)
	}
	// Unused slots are zero; a lookup must not see them.
	if _, ok := u.Map.Lookup(0); ok {
		t.Error("Lookup(0) found an unused slot")
	}
	if u.Map.At(1) != (RelMapping{1249, 1249}) {
		t.Errorf("At(1) = %+v", u.Map.At(1))
	}

	// A 64-entry (528-byte) map of 15's layout parses with its own capacity.
	var m RelMapFile
	if err := m.Decode(xtRelMapFile(64, RelMapping{1262, 1262})); err != nil || m.Capacity != 64 || m.Len() != 1 {
		t.Errorf("528-byte map: %v %+v", err, m)
	}
	// 16 and later: 64 entries and the CRC, no pad (524 bytes).
	pg16 := xtRelMapFile(64, RelMapping{1262, 1262}, RelMapping{1259, 16500})
	pg16 = pg16[:len(pg16)-4]
	if err := m.Decode(pg16); err != nil || len(pg16) != 524 || m.Capacity != 64 || m.Len() != 2 {
		t.Errorf("524-byte map: %v %+v", err, m)
	}
	if got, ok := m.Lookup(1259); !ok || got != 16500 {
		t.Errorf("524-byte map: Lookup(1259) = %d %v", got, ok)
	}
	pg16[20] ^= 1
	if err := m.Decode(pg16); err == nil || !strings.Contains(err.Error(), "CRC") {
		t.Errorf("524-byte map with a flipped bit: %v", err)
	}
}

func TestRelMapErrors(t *testing.T) {
	good := xtRelMapFile(62, RelMapping{1259, 16426})
	withCRC := func(f []byte) []byte {
		binary.LittleEndian.PutUint32(f[len(f)-8:], crc32.Checksum(f[:len(f)-8], crc32.MakeTable(crc32.Castagnoli)))
		return f
	}
	mutate := func(off int, v uint32) []byte {
		f := append([]byte(nil), good...)
		binary.LittleEndian.PutUint32(f[off:], v)
		return withCRC(f)
	}
	update := func(nbytes int32, file []byte) []byte {
		return append(xtBuf{}.u32(5).u32(1663).i32(nbytes), file...)
	}
	cases := []struct {
		name  string
		main  []byte
		frags []string
	}{
		{"short header", xtBuf{}.u32(5).u32(1663), []string{"relmap update", "xl_relmap_update needs 12 bytes"}},
		{"negative nbytes", update(-1, good), []string{"-1 map bytes"}},
		{"nbytes past end", update(513, good), []string{"513 map bytes"}},
		{"size not 16+8n nor 12+8n", update(511, good), []string{"size 511 is neither 16 + 8*n bytes (PostgreSQL 15) nor 12 + 8*n (16 and later)"}},
		{"too small", update(8, good), []string{"size 8"}},
		{"bad magic", update(512, mutate(0, 0x592718)), []string{"magic 0x592718"}},
		{"negative mappings", update(512, mutate(4, 0xFFFFFFFF)), []string{"-1 mappings"}},
		{"too many mappings", update(512, mutate(4, 63)), []string{"63 mappings, capacity 62"}},
		{"bad crc", update(512, func() []byte { f := append([]byte(nil), good...); f[9] ^= 1; return f }()), []string{"CRC"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var u RelMapUpdate
			xtWantErr(t, u.Decode(xtRec(t, RmgrRelMap, XLogRelMapUpdate, 15, tc.main)), KindCorrupt, tc.frags...)
		})
	}
	// Outside WAL the error has no LSN.
	var m RelMapFile
	err := m.Decode(good[:100])
	if e, ok := err.(*Error); !ok || e.LSN != 0 || e.Kind != KindCorrupt {
		t.Errorf("RelMapFile.Decode: %v", err)
	}
	_, err = decodeRelMapBody(xtRec(t, RmgrRelMap, 0x10, 15, update(512, good)))
	xtWantErr(t, err, KindUnsupported, "relmap record: unknown info 0x10")
}
