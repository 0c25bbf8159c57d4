package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pglzGolden is one compressed datum captured from PostgreSQL 15.18 (see
// testdata/pglz/README.md) with the text it must decompress to.
type pglzGolden struct {
	name    string
	rawSize int    // va_tcinfo & 0x3FFFFFFF
	data    []byte // the pglz stream after the 8-byte varlena header
	want    []byte
}

// pglzGeneratedText holds expected texts too big to keep in testdata; each is
// the SQL expression PostgreSQL evaluated, rewritten in Go.
var pglzGeneratedText = map[string]string{
	"hex96k": strings.Repeat("0123456789abcdef", 6000), // repeat('0123456789abcdef', 6000)
}

func loadPGLZGolden(t testing.TB) []pglzGolden {
	t.Helper()
	paths, err := filepath.Glob("testdata/pglz/*.datum")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden datums: %v", err)
	}
	var out []pglzGolden
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".datum")
		datum, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// A 4-byte-header compressed varlena (VARATT_IS_4B_C): va_header,
		// then va_tcinfo = rawsize | method<<30.
		if len(datum) < 8 {
			t.Fatalf("%s: %d bytes, too short for a compressed varlena", name, len(datum))
		}
		h := binary.LittleEndian.Uint32(datum)
		if h&0x03 != 0x02 {
			t.Fatalf("%s: va_header %08x is not a 4-byte compressed varlena", name, h)
		}
		if int(h>>2) != len(datum) {
			t.Fatalf("%s: varlena length %d, file has %d bytes", name, h>>2, len(datum))
		}
		tcinfo := binary.LittleEndian.Uint32(datum[4:])
		if method := tcinfo >> 30; method != 0 {
			t.Fatalf("%s: compression method %d, want 0 (pglz)", name, method)
		}
		g := pglzGolden{name: name, rawSize: int(tcinfo & 0x3FFFFFFF), data: datum[8:]}
		if s, ok := pglzGeneratedText[name]; ok {
			g.want = []byte(s)
		} else if g.want, err = os.ReadFile(strings.TrimSuffix(p, ".datum") + ".txt"); err != nil {
			t.Fatal(err)
		}
		if len(g.want) != g.rawSize {
			t.Fatalf("%s: expected text has %d bytes, datum says raw size %d", name, len(g.want), g.rawSize)
		}
		out = append(out, g)
	}
	return out
}

func TestPGLZDecompressGolden(t *testing.T) {
	golden := loadPGLZGolden(t)
	if len(golden) < 7 {
		t.Fatalf("found %d golden datums, want 7", len(golden))
	}
	for _, g := range golden {
		t.Run(g.name, func(t *testing.T) {
			got, err := PGLZDecompress(nil, g.data, g.rawSize, true)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, g.want) {
				t.Fatalf("decompressed %d bytes differ from PostgreSQL's text (%d bytes), first difference at %d",
					len(got), len(g.want), firstDiff(got, g.want))
			}

			// Slice decompression (check_complete=false) yields a prefix.
			for _, k := range []int{0, 1, 17, g.rawSize / 2, g.rawSize - 1} {
				got, err := PGLZDecompress(nil, g.data, k, false)
				if err != nil {
					t.Fatalf("slice of %d: %v", k, err)
				}
				if !bytes.Equal(got, g.want[:k]) {
					t.Fatalf("slice of %d: got %d bytes, first difference at %d", k, len(got), firstDiff(got, g.want[:k]))
				}
			}

			// A wrong raw size is caught when completeness is checked.
			for _, k := range []int{g.rawSize - 1, g.rawSize + 1} {
				if _, err := PGLZDecompress(nil, g.data, k, true); !IsKind(err, KindCorrupt) {
					t.Fatalf("raw size %d (true size %d) with checkComplete: err = %v, want KindCorrupt", k, g.rawSize, err)
				}
			}
			// So is a truncated stream.
			if _, err := PGLZDecompress(nil, g.data[:len(g.data)-1], g.rawSize, true); err == nil {
				t.Fatal("truncated input decompressed without error")
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestPGLZDecompressVectors(t *testing.T) {
	// 300 literals, then a match 300 bytes back: the offset needs the tag's
	// high nibble (0x1 << 8 | 0x2c).
	var long, longWant []byte
	ctrl := 0
	for i := range 300 {
		if i%8 == 0 {
			ctrl = len(long)
			long = append(long, 0x00)
		}
		c := byte('A' + i%26 + i/26%3)
		long = append(long, c)
		longWant = append(longWant, c)
	}
	long[ctrl] |= 1 << (300 % 8)    // the match is the 5th item of the last group
	long = append(long, 0x12, 0x2c) // len 3+2, off 0x12c = 300
	longWant = append(longWant, longWant[:5]...)

	tests := []struct {
		name          string
		src           []byte
		rawSize       int
		checkComplete bool
		want          string
		wantErr       string // substring of the error; "" means success
	}{
		{name: "literals across two control bytes", src: []byte("\x00abcdefgh\x00ij"), rawSize: 10, checkComplete: true, want: "abcdefghij"},
		// pg_lzcompress.c's own example: "11234" then a match of 16 at offset 4.
		{name: "overlapping match", src: []byte("\x20" + "11234" + "\x0d\x04"), rawSize: 21, checkComplete: true, want: "112341234123412341234"},
		{name: "extended length, offset 1", src: []byte("\x02a\x0f\x01\xff"), rawSize: 274, checkComplete: true, want: strings.Repeat("a", 274)},
		{name: "extended length zero", src: []byte("\x02a\x0f\x01\x00"), rawSize: 19, checkComplete: true, want: strings.Repeat("a", 19)},
		{name: "period 3 up to the end", src: []byte("\x08abc\x0f\x03\x02"), rawSize: 23, checkComplete: true, want: strings.Repeat("abc", 8)[:23]},
		{name: "period 7 then literal", src: []byte("\x00abcdefgh\x01\x0f\x07\x00!"), rawSize: 27, checkComplete: true, want: "abcdefgh" + "bcdefghbcdefghbcde" + "!"},
		{name: "non-overlapping match of 16", src: []byte("\x00abcdefgh\x00ijklmnop\x01\x0d\x10"), rawSize: 32, checkComplete: true, want: "abcdefghijklmnopabcdefghijklmnop"},
		{name: "match between literals", src: []byte("\x08xyz\x00\x03!"), rawSize: 7, checkComplete: true, want: "xyzxyz!"},
		{name: "offset in high nibble", src: long, rawSize: 305, checkComplete: true, want: string(longWant)},
		{name: "empty", src: nil, rawSize: 0, checkComplete: true, want: ""},

		{name: "offset 0", src: []byte("\x02a\x00\x00"), rawSize: 4, checkComplete: true, wantErr: "offset 0"},
		{name: "offset 0 without check", src: []byte("\x01\x00\x00"), rawSize: 3, wantErr: "offset 0"},
		{name: "offset before output start", src: []byte("\x02a\x00\x02"), rawSize: 4, checkComplete: true, wantErr: "before the output start"},
		{name: "match as first item", src: []byte("\x01\x00\x01"), rawSize: 3, wantErr: "before the output start"},
		{name: "truncated tag", src: []byte("\x02a\x00"), rawSize: 4, checkComplete: true, wantErr: "match tag truncated"},
		{name: "truncated length byte", src: []byte("\x02a\x0f\x01"), rawSize: 40, checkComplete: true, wantErr: "extended match length truncated"},
		{name: "match overruns raw size", src: []byte("\x02a\x00\x01"), rawSize: 3, checkComplete: true, wantErr: "overruns raw size 3"},
		{name: "match clamped without check", src: []byte("\x02a\x00\x01"), rawSize: 3, want: "aaa"},
		{name: "output short", src: []byte("\x00abc"), rawSize: 4, checkComplete: true, wantErr: "decompressed 3 of 4 raw bytes"},
		{name: "output short without check", src: []byte("\x00abc"), rawSize: 4, want: "abc"},
		{name: "input left over", src: []byte("\x00abc"), rawSize: 2, checkComplete: true, wantErr: "using 3 of 4 input bytes"},
		{name: "input left over without check", src: []byte("\x00abc"), rawSize: 2, want: "ab"},
		{name: "negative raw size", src: []byte("\x00a"), rawSize: -1, wantErr: "negative raw size"},
		{name: "raw size beyond any expansion", src: []byte("\x02a\x0f\x01\xff"), rawSize: 1000, checkComplete: true, wantErr: "cannot come from 5 compressed bytes"},
		{name: "raw size beyond any expansion without check", src: []byte("\x02a\x0f\x01\xff"), rawSize: 1 << 30, want: strings.Repeat("a", 274)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PGLZDecompress(nil, tt.src, tt.rawSize, tt.checkComplete)
			if tt.wantErr != "" {
				var werr *Error
				if !errors.As(err, &werr) || werr.Kind != KindCorrupt {
					t.Fatalf("err = %v (%T), want a KindCorrupt *Error", err, err)
				}
				if !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "pglz") {
					t.Fatalf("err = %q, want it to mention pglz and %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPGLZDecompressReusesDst(t *testing.T) {
	g := loadPGLZGolden(t)[0]
	// Stale bytes in dst must not leak into the output.
	dst := bytes.Repeat([]byte{0xAA}, g.rawSize+100)
	got, err := PGLZDecompress(dst, g.data, g.rawSize, true)
	if err != nil {
		t.Fatal(err)
	}
	if &got[0] != &dst[0] {
		t.Fatal("output did not reuse dst's storage although it had room")
	}
	if !bytes.Equal(got, g.want) {
		t.Fatal("output differs when decompressing into a dirty dst")
	}
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := PGLZDecompress(dst[:0], g.data, g.rawSize, true); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per call with a big enough dst, want 0", allocs)
	}

	small := make([]byte, 0, 10)
	got, err = PGLZDecompress(small, g.data, g.rawSize, true)
	if err != nil || !bytes.Equal(got, g.want) {
		t.Fatalf("with a small dst: err %v, equal %v", err, bytes.Equal(got, g.want))
	}
}

func TestPGLZRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	inputs := map[string][]byte{
		"empty":     nil,
		"one byte":  {7},
		"zeros 8k":  make([]byte, 8192),
		"run 300":   bytes.Repeat([]byte{'x'}, 300),
		"period 3":  bytes.Repeat([]byte("abc"), 1000),
		"period 13": bytes.Repeat([]byte("0123456789abc"), 500),
	}
	random := make([]byte, 5000)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	inputs["random"] = random
	words := []string{"heap ", "insert ", "wal ", "page ", "tuple ", "xid ", "lsn "}
	var text []byte
	for range 3000 {
		text = append(text, words[rng.IntN(len(words))]...)
	}
	inputs["words"] = text
	for _, g := range loadPGLZGolden(t) {
		inputs["golden "+g.name] = g.want
	}
	for name, in := range inputs {
		c := pglzCompressForTest(in)
		got, err := PGLZDecompress(nil, c, len(in), true)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got, in) {
			t.Fatalf("%s: round trip differs at %d", name, firstDiff(got, in))
		}
	}
	// The compressor really compresses, so matches (and overlapping ones)
	// were exercised above.
	if c := pglzCompressForTest(make([]byte, 8192)); len(c) > 8192/50 {
		t.Fatalf("8 KiB of zeros compressed to %d bytes", len(c))
	}
}

// pglzCompressForTest is a small greedy pglz compressor (one hash bucket per
// 3-byte prefix) for round-trip tests. It is not PostgreSQL's algorithm; the
// decoder is checked against real PostgreSQL output by the golden tests.
func pglzCompressForTest(src []byte) []byte {
	const maxOff, maxLen = 0x0fff, 18 + 255
	var out []byte
	var head [1 << 13]int32 // position+1 of the last occurrence of each hashed prefix
	ctrlPos, bit := 0, 8
	item := func(match bool) {
		if bit == 8 {
			ctrlPos = len(out)
			out = append(out, 0)
			bit = 0
		}
		if match {
			out[ctrlPos] |= 1 << bit
		}
		bit++
	}
	hash := func(i int) uint32 {
		v := uint32(src[i]) | uint32(src[i+1])<<8 | uint32(src[i+2])<<16
		return (v * 2654435761) >> (32 - 13)
	}
	for i := 0; i < len(src); {
		n, off := 0, 0
		if i+3 <= len(src) {
			h := hash(i)
			if cand := int(head[h]) - 1; cand >= 0 && i-cand <= maxOff {
				for n < maxLen && i+n < len(src) && src[cand+n] == src[i+n] {
					n++
				}
				off = i - cand
			}
			head[h] = int32(i + 1)
		}
		if n < 3 {
			item(false)
			out = append(out, src[i])
			i++
			continue
		}
		item(true)
		if n < 18 {
			out = append(out, byte(off>>4)&0xf0|byte(n-3), byte(off))
		} else {
			out = append(out, byte(off>>4)&0xf0|0x0f, byte(off), byte(n-18))
		}
		for j := i + 1; j < i+n && j+3 <= len(src); j++ {
			head[hash(j)] = int32(j + 1)
		}
		i += n
	}
	return out
}

func FuzzPGLZDecompress(f *testing.F) {
	for _, g := range loadPGLZGolden(f) {
		f.Add(g.data, uint16(min(g.rawSize, 0xffff)), true)
	}
	f.Add([]byte("\x20"+"11234"+"\x0d\x04"), uint16(21), true)
	f.Add([]byte("\x02a\x0f\x01\xff"), uint16(274), false)
	f.Add([]byte("\x02a\x00\x02"), uint16(4), true)
	f.Fuzz(func(t *testing.T, src []byte, rawSize uint16, checkComplete bool) {
		got, err := PGLZDecompress(nil, src, int(rawSize), checkComplete)
		if err != nil {
			var werr *Error
			if !errors.As(err, &werr) {
				t.Fatalf("error %v is %T, want *Error", err, err)
			}
		} else if checkComplete && len(got) != int(rawSize) {
			t.Fatalf("checkComplete succeeded with %d bytes, raw size %d", len(got), rawSize)
		}
		if len(got) > int(rawSize) {
			t.Fatalf("output %d bytes, longer than raw size %d", len(got), rawSize)
		}
		// Decompressing into dirty reused storage gives the same result.
		dirty := bytes.Repeat([]byte{0x5A}, int(rawSize))
		got2, err2 := PGLZDecompress(dirty, src, int(rawSize), checkComplete)
		if (err == nil) != (err2 == nil) || !bytes.Equal(got, got2) {
			t.Fatalf("reused dst changed the result: %v/%v", err, err2)
		}

		// Treat the input as raw data too: it must survive a round trip.
		c := pglzCompressForTest(src)
		back, err := PGLZDecompress(nil, c, len(src), true)
		if err != nil {
			t.Fatalf("round trip: %v", err)
		}
		if !bytes.Equal(back, src) {
			t.Fatalf("round trip differs at %d", firstDiff(back, src))
		}
	})
}

func BenchmarkPGLZDecompress(b *testing.B) {
	cases := loadPGLZGolden(b)
	// A bigger, mixed input: the golden texts run through the test compressor.
	var mixed []byte
	for _, g := range cases {
		mixed = append(mixed, g.want...)
	}
	cases = append(cases, pglzGolden{name: "mixed-testcompressor", rawSize: len(mixed), data: pglzCompressForTest(mixed), want: mixed})
	for _, g := range cases {
		b.Run(g.name, func(b *testing.B) {
			dst := make([]byte, g.rawSize)
			b.SetBytes(int64(g.rawSize))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := PGLZDecompress(dst, g.data, g.rawSize, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
