package wal

import "encoding/binary"

// pglzMaxExpansion bounds how many output bytes one input byte can produce:
// the largest match tag is 3 bytes for 18+255 = 273 bytes of output. Larger
// rawSizes cannot be reached, so they are refused (or not allocated) up front.
const pglzMaxExpansion = 273 / 3

// PGLZDecompress decompresses src, data in PostgreSQL's pglz format
// (src/common/pg_lzcompress.c pglz_decompress), into up to rawSize bytes.
//
// The output is written into dst's storage when cap(dst) allows it
// (dst[:0] is reused, its contents are ignored), otherwise into a new slice;
// either way the returned slice holds the output. No allocation happens when
// dst has room.
//
// With checkComplete (image restore, whole TOAST datums) the input must
// decode to exactly rawSize bytes and be fully consumed, and a match that
// would run past rawSize is corrupt; PostgreSQL itself only clamps such a
// match, but pglz_compress never emits one. Without checkComplete
// (PostgreSQL's slice decompression) output stops at rawSize, and stopping
// early because the input ran out is not an error.
//
// Errors are *Error of KindCorrupt with a zero LSN: this function does not
// know the record; callers that do set Error.LSN. On error the returned
// slice holds the bytes decoded before the damage.
func PGLZDecompress(dst, src []byte, rawSize int, checkComplete bool) ([]byte, error) {
	if rawSize < 0 {
		return dst[:0], pglzErrorf("negative raw size %d", rawSize)
	}
	limit := rawSize
	if maxOut := pglzMaxExpansion * len(src); limit > maxOut {
		if checkComplete {
			return dst[:0], pglzErrorf("raw size %d cannot come from %d compressed bytes (at most %d)", rawSize, len(src), maxOut)
		}
		limit = maxOut
	}
	var out []byte
	if cap(dst) >= limit {
		out = dst[:limit]
	} else {
		out = make([]byte, limit)
	}

	sp, dp := 0, 0
	for sp < len(src) && dp < len(out) {
		ctrl := src[sp]
		sp++
		// Eight literals in a row (incompressible stretches) copy as a word.
		if ctrl == 0 && len(src)-sp >= 8 && len(out)-dp >= 8 {
			binary.LittleEndian.PutUint64(out[dp:], binary.LittleEndian.Uint64(src[sp:]))
			sp += 8
			dp += 8
			continue
		}
		for bit := 0; bit < 8 && sp < len(src) && dp < len(out); bit++ {
			if ctrl&1 == 0 {
				out[dp] = src[sp]
				dp++
				sp++
				ctrl >>= 1
				continue
			}
			ctrl >>= 1
			// Match tag: low nibble length-3, high nibble the offset's top 4
			// bits, next byte its low 8; length 18 takes one more byte.
			if len(src)-sp < 2 {
				return out[:dp], pglzErrorf("match tag truncated at input offset %d", sp)
			}
			b0, b1 := src[sp], src[sp+1]
			sp += 2
			n := int(b0&0x0f) + 3
			off := int(b0&0xf0)<<4 | int(b1)
			if n == 18 {
				if sp >= len(src) {
					return out[:dp], pglzErrorf("extended match length truncated at input offset %d", sp)
				}
				n += int(src[sp])
				sp++
			}
			if off == 0 {
				return out[:dp], pglzErrorf("match offset 0 at input offset %d", sp)
			}
			if off > dp {
				return out[:dp], pglzErrorf("match offset %d reaches before the output start (%d bytes written)", off, dp)
			}
			if n > len(out)-dp {
				if checkComplete {
					return out[:dp], pglzErrorf("match of %d bytes at output offset %d overruns raw size %d", n, dp, rawSize)
				}
				n = len(out) - dp
			}
			// Short matches dominate real data: one or two unaligned 8-byte
			// moves beat copy's call overhead. Both loads come before the
			// stores, so the source must lie a whole move back (off >= 8 or
			// 16) and the slack past n must fit in out.
			s := dp - off
			switch {
			case n <= 8 && off >= 8 && len(out)-dp >= 8:
				binary.LittleEndian.PutUint64(out[dp:], binary.LittleEndian.Uint64(out[s:]))
				dp += n
			case n <= 16 && off >= 16 && len(out)-dp >= 16:
				w0 := binary.LittleEndian.Uint64(out[s:])
				w1 := binary.LittleEndian.Uint64(out[s+8:])
				binary.LittleEndian.PutUint64(out[dp:], w0)
				binary.LittleEndian.PutUint64(out[dp+8:], w1)
				dp += n
			default:
				dp = pglzCopyMatch(out, dp, off, n)
			}
		}
	}
	if checkComplete && (dp != len(out) || sp != len(src)) {
		return out[:dp], pglzErrorf("decompressed %d of %d raw bytes using %d of %d input bytes", dp, rawSize, sp, len(src))
	}
	return out[:dp], nil
}

// pglzCopyMatch appends n bytes copied from off bytes back, with LZ77
// semantics (an overlapping source repeats), and returns the new dp. The
// caller guarantees 0 < off <= dp and dp+n <= len(out).
func pglzCopyMatch(out []byte, dp, off, n int) int {
	end := dp + n
	if off < 8 {
		// A short period (runs of zeros in pages, repeated characters):
		// build 8 bytes of the pattern once and store them every
		// stride bytes, the largest multiple of off that fits in a word, so
		// each store starts at the same phase. Stores may run up to 7 bytes
		// past end; that is scratch space the following items overwrite.
		s := dp - off
		var w uint64
		stride := 0 // largest multiple of off <= 8
		for j, k := 0, 0; j < 8; j++ {
			w |= uint64(out[s+k]) << (8 * j)
			if k++; k == off {
				k = 0
				stride = j + 1
			}
		}
		if w == 0 { // zero runs, common in page images
			clear(out[dp:end])
			return end
		}
		for dp < end && len(out)-dp >= 8 {
			binary.LittleEndian.PutUint64(out[dp:], w)
			dp += stride
		}
		for ; dp < end; dp++ { // the last bytes of out
			out[dp] = out[dp-off]
		}
		return end
	}
	// Overlap: the source repeats with period off, so each copy of off bytes
	// is disjoint, and the period can double after each one (the source
	// position stays fixed).
	for off < n {
		copy(out[dp:dp+off], out[dp-off:dp])
		dp += off
		n -= off
		off += off
	}
	copy(out[dp:dp+n], out[dp-off:dp-off+n])
	return dp + n
}

func pglzErrorf(format string, args ...any) *Error {
	e := errorf(0, KindCorrupt, format, args...)
	e.Msg = "pglz: " + e.Msg
	return e
}
