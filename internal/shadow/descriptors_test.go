package shadow

import (
	"testing"
)

func TestParseInt2Vector(t *testing.T) {
	for in, want := range map[string][]int16{"": nil, "{}": nil, "{1}": {1}, "{3,1,-2}": {3, 1, -2}, "[0:1]={2,1}": {2, 1}} {
		got, err := parseInt2Vector(in)
		if err != nil || len(got) != len(want) {
			t.Fatalf("%q: %v %v", in, got, err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%q: %v", in, got)
			}
		}
	}
	for _, bad := range []string{"1,2", "{a}", "{1,}", "{99999}"} {
		if _, err := parseInt2Vector(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func itoa(v uint32) string {
	b := []byte{}
	for v > 0 || len(b) == 0 {
		b = append([]byte{byte('0' + v%10)}, b...)
		v /= 10
	}
	return string(b)
}
