package wal

import (
	"fmt"
	"strconv"
	"strings"
)

// LSN is a PostgreSQL WAL position (XLogRecPtr): a byte offset into the
// infinite WAL stream.
type LSN uint64

// String renders the LSN the way PostgreSQL does: %X/%08X.
func (l LSN) String() string {
	var b [17]byte
	return string(l.AppendText(b[:0]))
}

// AppendText appends the "hi/lo" form (upper-case hex, lo padded to 8) to
// dst without fmt: it is formatted for every decoded row.
func (l LSN) AppendText(dst []byte) []byte {
	const digits = "0123456789ABCDEF"
	hi, lo := uint32(l>>32), uint32(l)
	if hi == 0 {
		dst = append(dst, '0')
	} else {
		started := false
		for shift := 28; shift >= 0; shift -= 4 {
			d := (hi >> uint(shift)) & 0xF
			if d != 0 || started {
				dst = append(dst, digits[d])
				started = true
			}
		}
	}
	dst = append(dst, '/')
	for shift := 28; shift >= 0; shift -= 4 {
		dst = append(dst, digits[(lo>>uint(shift))&0xF])
	}
	return dst
}

// ParseLSN parses the "hi/lo" hexadecimal text form used by PostgreSQL.
func ParseLSN(s string) (LSN, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("parsing LSN %q: missing '/'", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("parsing LSN %q: %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("parsing LSN %q: %w", s, err)
	}
	return LSN(h<<32 | l), nil
}

// MaxAlign rounds n up to PostgreSQL's MAXALIGN (8 on every supported platform).
func MaxAlign[T ~uint64 | ~uint32 | ~int](n T) T { return (n + 7) &^ 7 }
