package source

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckIdentity(t *testing.T) {
	stored := Identity{SystemID: 7300000000000000001, Timeline: 1, XLogPos: 0x3000000, DBName: ""}

	if err := CheckIdentity(stored, Identity{SystemID: stored.SystemID, Timeline: 1, XLogPos: 0x9000000}); err != nil {
		t.Fatalf("same system and timeline, other position: %v", err)
	}

	err := CheckIdentity(stored, Identity{SystemID: 7300000000000000002, Timeline: 1})
	var mm *IdentityMismatchError
	if !errors.As(err, &mm) || !mm.SystemIDChanged() {
		t.Fatalf("system id change: got %v", err)
	}
	for _, want := range []string{"7300000000000000002", "7300000000000000001", "different PostgreSQL cluster", "fresh state directory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("system id error %q lacks %q", err, want)
		}
	}

	err = CheckIdentity(stored, Identity{SystemID: stored.SystemID, Timeline: 2})
	if !errors.As(err, &mm) || mm.SystemIDChanged() {
		t.Fatalf("timeline change: got %v", err)
	}
	for _, want := range []string{"timeline 2", "timeline 1", "fresh state directory", "does not follow timeline switches"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("timeline error %q lacks %q", err, want)
		}
	}

	// A system id change dominates a timeline change.
	err = CheckIdentity(stored, Identity{SystemID: 1, Timeline: 5})
	if !errors.As(err, &mm) || !mm.SystemIDChanged() {
		t.Fatalf("both changed: got %v", err)
	}
	if IsTransient(err) {
		t.Fatal("an identity mismatch is transient")
	}
}

func TestIdentityParseRow(t *testing.T) {
	id, err := identityParseRow([][]byte{[]byte("7312345678901234567"), []byte("3"), []byte("1/A0000F8"), nil})
	if err != nil {
		t.Fatal(err)
	}
	if id.SystemID != 7312345678901234567 || id.Timeline != 3 || id.XLogPos != 0x1_0A0000F8 || id.DBName != "" {
		t.Fatalf("parsed %+v", id)
	}
	id, err = identityParseRow([][]byte{[]byte("1"), []byte("1"), []byte("0/0"), []byte("postgres")})
	if err != nil || id.DBName != "postgres" {
		t.Fatalf("dbname: %+v, %v", id, err)
	}
	bad := [][][]byte{
		{[]byte("1"), []byte("1")},
		{[]byte("x"), []byte("1"), []byte("0/0")},
		{[]byte("1"), []byte("0"), []byte("0/0")},
		{[]byte("1"), []byte("4294967296"), []byte("0/0")},
		{[]byte("1"), []byte("1"), []byte("00")},
	}
	for _, row := range bad {
		if _, err := identityParseRow(row); err == nil {
			t.Errorf("row %q parsed", row)
		}
	}
}
