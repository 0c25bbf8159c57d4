package msg

import (
	"fmt"
	"strconv"
	"strings"
)

// TID is a heap tuple's identity: its block and its line pointer (1-based;
// 0 means no tuple).
type TID struct {
	Block uint32
	Off   uint16
}

// Valid tells a tuple from none.
func (t TID) Valid() bool { return t.Off != 0 }

// MaxTIDLen is the longest TID text: "4294967295:65535".
const MaxTIDLen = 16

// AppendTID appends a tuple identity's text, "block:offset" in decimal
// (block 0..4294967295, offset 1..65535), to dst.
func AppendTID(dst []byte, t TID) []byte {
	dst = strconv.AppendUint(dst, uint64(t.Block), 10)
	dst = append(dst, ':')
	return strconv.AppendUint(dst, uint64(t.Off), 10)
}

// String is the tuple's metadata text (KeyTID, KeyOldTID), e.g. "0:1".
func (t TID) String() string { return string(AppendTID(make([]byte, 0, MaxTIDLen), t)) }

// ParseTID reads a TID's text back. It accepts only the canonical form
// (decimal digits without sign, spaces or leading zeros) and an offset of at
// least 1, so ParseTID and String round-trip both ways.
func ParseTID(s string) (TID, error) {
	b, o, ok := strings.Cut(s, ":")
	if !ok {
		return TID{}, fmt.Errorf("tuple identity %q: want block:offset", s)
	}
	bv, ok1 := parseCanonicalUint(b, 1<<32-1)
	ov, ok2 := parseCanonicalUint(o, 1<<16-1)
	if !ok1 || !ok2 || ov == 0 {
		return TID{}, fmt.Errorf("tuple identity %q: want block:offset, block 0..4294967295 and offset 1..65535 in decimal", s)
	}
	return TID{Block: uint32(bv), Off: uint16(ov)}, nil
}

// parseCanonicalUint parses decimal digits with no sign and no leading
// zero, up to max.
func parseCanonicalUint(s string, max uint64) (uint64, bool) {
	if s == "" || len(s) > 1 && s[0] == '0' || len(s) > 20 {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (max-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}
