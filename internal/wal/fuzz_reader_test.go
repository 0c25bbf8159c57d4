package wal

import (
	"errors"
	"testing"
)

// FuzzStreamReader feeds arbitrary bytes (seeded with real WAL) in chunks of
// a fuzzed size: the reader must return records or *Error values naming an
// LSN inside the input, and never panic.
func FuzzStreamReader(f *testing.F) {
	all, _ := fixtureBytes(f)
	f.Add(all[:3*BlockSize], uint16(1000))
	f.Add(all[BlockSize*8:BlockSize*11], uint16(7))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint16) {
		start := LSN(0x7000000)
		sr, _ := NewStreamReader(start, StreamOptions{SegmentSize: 1 << 20})
		step := int(chunk%4096) + 1
		for {
			rec, err := sr.Next()
			if err == ErrNeedMore {
				if len(data) == 0 {
					return
				}
				n := min(step, len(data))
				sr.Push(data[:n])
				data = data[n:]
				continue
			}
			if err != nil {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("%T %v", err, err)
				}
				if e.LSN < start || e.LSN > sr.PushLSN() {
					t.Fatalf("error LSN %s outside [%s, %s]: %v", e.LSN, start, sr.PushLSN(), err)
				}
				if e.Kind == KindCRC {
					continue
				}
				return
			}
			if int(rec.Header.TotLen) != len(rec.Raw) || rec.End <= rec.LSN || rec.Next < rec.End {
				t.Fatalf("inconsistent record %+v", rec.Header)
			}
		}
	})
}

// FuzzDecodeRecord decodes arbitrary bytes as one record (CRC fixed up so the
// body parser is reached).
func FuzzDecodeRecord(f *testing.F) {
	all, start := fixtureBytes(f)
	recs, _ := readBytesErr(start, all, len(all))
	for i := 0; i < len(recs); i += 97 {
		f.Add(recs[i].Raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) >= RecordHeaderSize {
			raw[0], raw[1], raw[2], raw[3] = byte(len(raw)), byte(len(raw)>>8), byte(len(raw)>>16), byte(len(raw)>>24)
			c := RecordCRC(raw)
			raw[20], raw[21], raw[22], raw[23] = byte(c), byte(c>>8), byte(c>>16), byte(c>>24)
		}
		var rec Record
		err := DecodeRecord(raw, 0x1000, layouts[0], &rec)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.LSN != 0x1000 {
				t.Fatalf("%T %v", err, err)
			}
			return
		}
		total := len(rec.MainData)
		for _, b := range rec.Blocks {
			total += len(b.Data) + len(b.ImageData)
		}
		if total > len(raw) {
			t.Fatalf("decoded %d payload bytes from %d", total, len(raw))
		}
	})
}
