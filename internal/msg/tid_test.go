package msg

import (
	"strings"
	"testing"
)

func TestTIDString(t *testing.T) {
	for _, c := range []struct {
		tid  TID
		want string
	}{
		{TID{0, 1}, "0:1"},
		{TID{7, 3}, "7:3"},
		{TID{1000, 10}, "1000:10"},
		{TID{4294967295, 65535}, "4294967295:65535"},
	} {
		if got := c.tid.String(); got != c.want {
			t.Errorf("%+v.String() = %q, want %q", c.tid, got, c.want)
		}
		if got := len(c.tid.String()); got > MaxTIDLen {
			t.Errorf("%+v.String() has %d bytes, more than MaxTIDLen %d", c.tid, got, MaxTIDLen)
		}
		got, err := ParseTID(c.want)
		if err != nil || got != c.tid {
			t.Errorf("ParseTID(%q) = %+v, %v; want %+v, nil", c.want, got, err, c.tid)
		}
	}
}

func TestTIDValid(t *testing.T) {
	if (TID{Block: 5}).Valid() {
		t.Errorf("TID{5, 0}.Valid() = true, want false")
	}
	if !(TID{Off: 1}).Valid() {
		t.Errorf("TID{0, 1}.Valid() = false, want true")
	}
}

func TestParseTIDRejects(t *testing.T) {
	for _, s := range []string{
		"", "1", ":", "1:", ":1", "1:0", "01:1", "1:01", "00:1", "-1:1", "+1:1", "1:-1",
		"1:65536", "4294967296:1", " 1:1", "1:1 ", "1 :1", "1:1:1", "1/1", "0x1:1", "a:1",
		"99999999999999999999:1", "1:99999999999999999999", "184467440737095516160:1",
	} {
		if got, err := ParseTID(s); err == nil {
			t.Errorf("ParseTID(%q) = %+v, nil; want an error", s, got)
		} else if !strings.Contains(err.Error(), "tuple identity") {
			t.Errorf("ParseTID(%q) error %q does not say tuple identity", s, err)
		}
	}
}

func FuzzParseTID(f *testing.F) {
	for _, s := range []string{"0:1", "4294967295:65535", "1:0", "01:1", "1:65536", "", "9:9:9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tid, err := ParseTID(s)
		if err != nil {
			return
		}
		if !tid.Valid() {
			t.Errorf("ParseTID(%q) = %+v, an invalid TID", s, tid)
		}
		if got := tid.String(); got != s {
			t.Errorf("ParseTID(%q).String() = %q", s, got)
		}
	})
}

func FuzzTIDRoundTrip(f *testing.F) {
	f.Add(uint32(0), uint16(1))
	f.Add(uint32(4294967295), uint16(65535))
	f.Add(uint32(10), uint16(0))
	f.Fuzz(func(t *testing.T, block uint32, off uint16) {
		tid := TID{block, off}
		if off == 0 {
			if _, err := ParseTID(tid.String()); err == nil {
				t.Errorf("ParseTID(%q) accepted offset 0", tid.String())
			}
			return
		}
		s := string(AppendTID([]byte("x"), tid))[1:]
		if s != tid.String() {
			t.Errorf("AppendTID gives %q, String %q", s, tid.String())
		}
		got, err := ParseTID(s)
		if err != nil || got != tid {
			t.Errorf("ParseTID(%q) = %+v, %v; want %+v, nil", s, got, err, tid)
		}
	})
}
