package wal

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func mustLayout(t testing.TB, major int) *Layout {
	t.Helper()
	l, err := LayoutForMajor(major)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestIdentify(t *testing.T) {
	pg15, pg16, pg17, pg18 := mustLayout(t, 15), mustLayout(t, 16), mustLayout(t, 17), mustLayout(t, 18)
	tests := []struct {
		layout *Layout
		rmid   RmgrID
		info   uint8
		want   string
	}{
		{pg15, RmgrHeap, 0x00, "INSERT"},
		{pg15, RmgrHeap, 0x80, "INSERT+INIT"},
		{pg15, RmgrHeap, 0x40, "HOT_UPDATE"},
		{pg15, RmgrHeap, 0xC0, "HOT_UPDATE+INIT"},
		{pg15, RmgrHeap, 0x50, "HEAP_CONFIRM"},
		{pg15, RmgrHeap, 0x90, "UNKNOWN (90)"}, // DELETE has no +INIT form
		{pg15, RmgrHeap, 0x01, "INSERT"},       // generic low bits are ignored
		{pg15, RmgrHeap, 0x2F, "UPDATE"},
		{pg15, RmgrHeap2, 0xD0, "MULTI_INSERT+INIT"},
		{pg15, RmgrHeap2, 0x10, "PRUNE"},
		{pg15, RmgrHeap2, 0x20, "VACUUM"},
		{pg15, RmgrHeap2, 0x30, "FREEZE_PAGE"},
		{pg15, RmgrHeap2, 0x80, "UNKNOWN (80)"},
		{pg15, RmgrXact, 0x00, "COMMIT"},
		{pg15, RmgrXact, 0x80, "COMMIT"}, // XLOG_XACT_HAS_INFO is not part of the type
		{pg15, RmgrXact, 0xA0, "ABORT"},
		{pg15, RmgrXact, 0x60, "INVALIDATION"},
		{pg15, RmgrXact, 0x70, "UNKNOWN (70)"},
		{pg15, RmgrXact, 0xF0, "UNKNOWN (70)"}, // stats key is info>>4 & 7
		{pg15, RmgrXLOG, 0xA0, "FPI_FOR_HINT"},
		{pg15, RmgrXLOG, 0xB0, "FPI"},
		{pg15, RmgrXLOG, 0xC0, "UNKNOWN (c0)"},
		{pg15, RmgrXLOG, 0xE0, "UNKNOWN (e0)"}, // CHECKPOINT_REDO is 17+
		{pg15, RmgrBtree, 0x00, "INSERT_LEAF"},
		{pg15, RmgrBtree, 0xE0, "META_CLEANUP"},
		{pg15, RmgrBtree, 0xF0, "UNKNOWN (f0)"},
		{pg15, RmgrGin, 0x00, "UNKNOWN (0)"},
		{pg15, RmgrBRIN, 0x90, "INSERT+INIT"},
		{pg15, RmgrGeneric, 0x00, "Generic"},
		{pg15, RmgrGeneric, 0xF0, "Generic"},
		{pg15, RmgrLogicalMsg, 0x00, "MESSAGE"},
		{pg15, RmgrLogicalMsg, 0x10, "UNKNOWN (10)"},
		{pg15, RmgrCommitTs, 0x10, "TRUNCATE"},
		{pg15, RmgrReplOrigin, 0x10, "DROP"},
		{pg15, 22, 0x00, "UNKNOWN (0)"},
		{pg15, 128, 0x30, "UNKNOWN (30)"},
		{pg15, 255, 0xFF, "UNKNOWN (f0)"},
		{nil, RmgrHeap2, 0x10, "PRUNE"},
		{pg16, RmgrHeap2, 0x10, "PRUNE"},
		{pg16, RmgrXLOG, 0xE0, "UNKNOWN (e0)"},
		{pg17, RmgrHeap2, 0x10, "PRUNE_ON_ACCESS"},
		{pg17, RmgrHeap2, 0x20, "PRUNE_VACUUM_SCAN"},
		{pg17, RmgrHeap2, 0x30, "PRUNE_VACUUM_CLEANUP"},
		{pg17, RmgrHeap2, 0x50, "MULTI_INSERT"},
		{pg17, RmgrXLOG, 0xE0, "CHECKPOINT_REDO"},
		{pg17, RmgrHeap, 0x00, "INSERT"},
		{pg18, RmgrHeap2, 0x30, "PRUNE_VACUUM_CLEANUP"},
		{pg18, RmgrXLOG, 0xE0, "CHECKPOINT_REDO"},
		{pg18, RmgrXact, 0x00, "COMMIT"},
	}
	for _, tt := range tests {
		major := 0
		if tt.layout != nil {
			major = tt.layout.Major
		}
		if got := Identify(tt.layout, tt.rmid, tt.info); got != tt.want {
			t.Errorf("Identify(PG%d, %s, 0x%02X) = %q, want %q", major, tt.rmid, tt.info, got, tt.want)
		}
	}
}

func TestIdentifyDoesNotAllocate(t *testing.T) {
	pg17 := mustLayout(t, 17)
	n := testing.AllocsPerRun(100, func() {
		for rmid := 0; rmid < 256; rmid++ {
			for info := 0; info < 256; info += 0x10 {
				_ = Identify(pg17, RmgrID(rmid), uint8(info))
			}
		}
	})
	if n != 0 {
		t.Fatalf("Identify allocated %.1f times per run, want 0", n)
	}
}

// TestIdentifyMatchesPG15Source re-derives every name from the PostgreSQL 15
// source tree (rmgrlist.h, the *_identify functions and the opcode #defines)
// and compares all 22x16 builtin entries.
func TestIdentifyMatchesPG15Source(t *testing.T) {
	root := os.Getenv("WALSHADOW_PG15_SRC")
	if root == "" {
		root = "/work/pgsrc/postgresql-15-15.18"
	}
	if _, err := os.Stat(filepath.Join(root, "src/include/access/rmgrlist.h")); err != nil {
		t.Skipf("PostgreSQL 15 source tree not found at %s (set WALSHADOW_PG15_SRC): %v", root, err)
	}
	defines := pgDefines(t, root)
	funcs := identifyFuncNames(t, root)
	if len(funcs) != int(RmgrMaxBuiltin)+1 {
		t.Fatalf("rmgrlist.h: found %d rmgrs, want %d", len(funcs), RmgrMaxBuiltin+1)
	}
	bodies := identifyBodies(t, root)
	pg15 := mustLayout(t, 15)
	named := 0
	for rmid, fn := range funcs {
		body, ok := bodies[fn]
		if !ok {
			t.Fatalf("no body found for %s", fn)
		}
		cases, always := parseIdentifyBody(t, fn, body, defines)
		mask := uint8(0xF0) // info & ~XLR_INFO_MASK
		if fn == "xact_identify" {
			mask = 0x70 // XLOG_XACT_OPMASK
		}
		for nib := 0; nib < 16; nib++ {
			info := uint8(nib << 4)
			want, ok := cases[info&mask]
			if always != "" {
				want, ok = always, true
			}
			if !ok {
				want = unknownRecordTypes[(info&mask)>>4]
				if fn == "xact_identify" {
					want = unknownRecordTypes[nib&7]
				}
			} else {
				named++
			}
			if got := Identify(pg15, RmgrID(rmid), info); got != want {
				t.Errorf("%s(0x%02X): Identify = %q, source says %q", fn, info, got, want)
			}
		}
	}
	// Guard against a parser that silently finds nothing.
	if named < 130 {
		t.Fatalf("only %d named entries derived from the source; parser broken?", named)
	}
}

func pgDefines(t *testing.T, root string) map[string]int {
	t.Helper()
	re := regexp.MustCompile(`(?m)^#define\s+(\w+)\s+(0x[0-9A-Fa-f]+|\d+)\b`)
	defs := map[string]int{}
	err := filepath.WalkDir(filepath.Join(root, "src/include"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".h") {
			return err
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			v, err := strconv.ParseInt(m[2], 0, 64)
			if err == nil {
				defs[m[1]] = int(v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return defs
}

func identifyFuncNames(t *testing.T, root string) []string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "src/include/access/rmgrlist.h"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^PG_RMGR\(\w+,\s*"[^"]*",\s*\w+,\s*\w+,\s*(\w+),`)
	var names []string
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		names = append(names, m[1])
	}
	return names
}

func identifyBodies(t *testing.T, root string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "src/backend/access/rmgrdesc/*.c"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no rmgrdesc sources: %v", err)
	}
	re := regexp.MustCompile(`(?s)\n(\w+_identify)\(uint8 info\)\n\{(.*?)\n\}`)
	bodies := map[string]string{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			bodies[m[1]] = m[2]
		}
	}
	return bodies
}

// parseIdentifyBody maps case values to names. It understands the shapes used
// in PG15: "case A | B:" lines followed by `id = "X";` or `return "X";`, and
// the logicalmsg `if (... == A) return "X";`. A name returned with no
// condition before it (generic_identify) comes back as always.
func parseIdentifyBody(t *testing.T, fn, body string, defs map[string]int) (cases map[uint8]string, always string) {
	t.Helper()
	cases = map[uint8]string{}
	caseRe := regexp.MustCompile(`^case\s+(.+):$`)
	nameRe := regexp.MustCompile(`^(?:id\s*=|return)\s*"([^"]+)";$`)
	ifRe := regexp.MustCompile(`==\s*(\w+)\)$`)
	eval := func(expr string) uint8 {
		v := 0
		for _, part := range strings.Split(expr, "|") {
			part = strings.TrimSpace(part)
			d, ok := defs[part]
			if !ok {
				t.Fatalf("%s: unknown constant %q", fn, part)
			}
			v |= d
		}
		return uint8(v)
	}
	var pending []uint8
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimSpace(line)
		if m := caseRe.FindStringSubmatch(line); m != nil {
			pending = append(pending, eval(m[1]))
			continue
		}
		if m := ifRe.FindStringSubmatch(line); m != nil {
			pending = append(pending, eval(m[1]))
			continue
		}
		if m := nameRe.FindStringSubmatch(line); m != nil {
			if len(pending) == 0 && len(cases) == 0 {
				always = m[1]
			}
			for _, v := range pending {
				cases[v] = m[1]
			}
			pending = pending[:0]
		}
	}
	return cases, always
}

func FuzzIdentify(f *testing.F) {
	f.Add(15, uint8(RmgrHeap), uint8(0x80))
	f.Add(17, uint8(RmgrHeap2), uint8(0x10))
	f.Add(0, uint8(200), uint8(0xFF))
	f.Fuzz(func(t *testing.T, major int, rmid, info uint8) {
		var layout *Layout
		if major != 0 {
			layout = &Layout{Major: major}
		}
		got := Identify(layout, RmgrID(rmid), info)
		if got == "" {
			t.Fatalf("Identify(%d, %d, 0x%02X) is empty", major, rmid, info)
		}
		if got != Identify(layout, RmgrID(rmid), info&0xF0) {
			t.Fatalf("Identify(%d, %d, 0x%02X) depends on the generic low bits", major, rmid, info)
		}
	})
}
