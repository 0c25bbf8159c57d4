package statefile

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/statefile/statefiletest"
)

var update = flag.Bool("update", false, "rewrite the golden files")

type sample struct {
	Name  string   `json:"name"`
	LSN   string   `json:"lsn"`
	Count int      `json:"count"`
	Tags  []string `json:"tags,omitempty"`
}

var spec = Spec{Format: "walshadow-sample", Version: 2, Remedy: "remove it"}

func TestEnvelopeGoldenAndRoundTrip(t *testing.T) {
	body := sample{Name: "orders", LSN: "0/5A3F1C8", Count: 3, Tags: []string{"a", "b"}}
	b, err := spec.Encode(body)
	if err != nil {
		t.Fatal(err)
	}
	statefiletest.Golden(t, filepath.Join("testdata", "sample.json"), b, *update)
	path := filepath.Join(t.TempDir(), "s.json")
	if err := spec.Write(path, body); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("written file: %v, mode %v; want 0600", err, info.Mode())
	}
	var got sample
	if err := spec.Read(path, &got, nil); err != nil {
		t.Fatal(err)
	}
	if got.Name != body.Name || got.LSN != body.LSN || got.Count != body.Count || strings.Join(got.Tags, ",") != "a,b" {
		t.Errorf("read back %+v, wrote %+v", got, body)
	}
}

func TestAbsent(t *testing.T) {
	var got sample
	err := spec.Read(filepath.Join(t.TempDir(), "none.json"), &got, nil)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("absent file: %v, want fs.ErrNotExist", err)
	}
}

// TestTruncatedAtEveryLength: every proper prefix of a file is truncated
// (the body is last), never corrupt and never read as valid.
func TestTruncatedAtEveryLength(t *testing.T) {
	b, err := spec.Encode(sample{Name: "x", LSN: "0/1", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	full := strings.TrimRight(string(b), "\n")
	for n := 0; n < len(full); n++ {
		var got sample
		err := spec.Decode("f", []byte(full[:n]), &got, nil)
		var se *Error
		if !errors.As(err, &se) || !se.Truncated {
			t.Fatalf("prefix of %d bytes %q: %v, want truncated", n, full[:n], err)
		}
	}
}

func TestCorrupt(t *testing.T) {
	good, err := spec.Encode(sample{Name: "orders", LSN: "0/1", Count: 7})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		data string
		want string
	}{
		"body edited":               {strings.Replace(string(good), `"count": 7`, `"count": 8`, 1), "checksum mismatch"},
		"another format":            {strings.Replace(string(good), "walshadow-sample", "walshadow-other", 1), `format "walshadow-other", want "walshadow-sample"`},
		"another version":           {strings.Replace(string(good), `"version": 2`, `"version": 3`, 1), "version 3, this walshadow reads version 2"},
		"trailing data":             {string(good) + "{}", "invalid character"},
		"not JSON":                  {"\x00\x01garbage", "invalid character"},
		"no body, no legacy reader": {`{"format": "walshadow-sample", "version": 1, "count": 3}`, "no body"},
	}
	// A body with a field the owner does not know, checksummed right.
	body := "{\n    \"name\": \"x\",\n    \"extra\": 1\n  }"
	cases["unknown body field"] = struct{ data, want string }{
		"{\n  \"format\": \"walshadow-sample\",\n  \"version\": 2,\n  \"crc32c\": " + strconv.FormatUint(uint64(CRC([]byte(body))), 10) + ",\n  \"body\": " + body + "\n}\n",
		`unknown field "extra"`}
	for name, c := range cases {
		var got sample
		err := spec.Decode("state/s.json", []byte(c.data), &got, nil)
		var se *Error
		if !errors.As(err, &se) || se.Truncated {
			t.Errorf("%s: %v, want corrupt", name, err)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "state/s.json is corrupt (") || !strings.HasSuffix(err.Error(), ": remove it") {
			t.Errorf("%s: %q, want it to name the file, say %q and end with the remedy", name, err, c.want)
		}
	}
}

func TestLegacyReader(t *testing.T) {
	old := []byte(`{"format": 1, "written_before": "0/3000A28"}`)
	var got sample
	called := false
	err := spec.Decode("w.json", old, &got, func(data []byte) error {
		called = true
		if string(data) != string(old) {
			t.Errorf("legacy reader got %q", data)
		}
		got.LSN = "0/3000A28"
		return nil
	})
	if err != nil || !called || got.LSN != "0/3000A28" {
		t.Fatalf("legacy: err %v, called %v, got %+v", err, called, got)
	}
	err = spec.Decode("w.json", old, &got, func([]byte) error { return errors.New("written_before: bad LSN") })
	var se *Error
	if !errors.As(err, &se) || se.Truncated || !strings.Contains(err.Error(), "w.json is corrupt (written_before: bad LSN)") {
		t.Errorf("legacy refusal: %v, want corrupt naming the file", err)
	}
}

func TestStateDirPaths(t *testing.T) {
	d := StateDir("/s")
	for got, want := range map[string]string{
		d.Manifest(): "/s/manifest.json", d.LegacyProgress(): "/s/progress.json", d.Spool(): "/s/spool",
		d.Archive(): "/s/archive", d.Shadow(): "/s/shadow", d.DescLog(): "/s/desclog",
		string(d.Output()): "/s/clickhouse", d.Output().Written(): "/s/clickhouse/written.json",
		d.Output().Loads(): "/s/clickhouse/loads.json", d.Output().Baseline(): "/s/clickhouse/baseline.json",
	} {
		if got != want {
			t.Errorf("%s, want %s", got, want)
		}
	}
}

// FuzzDecode: any bytes give a body, absence, truncation or corruption,
// never a panic; a body read is the one its envelope checksums.
func FuzzDecode(f *testing.F) {
	good, _ := spec.Encode(sample{Name: "orders", LSN: "0/1", Count: 7})
	f.Add(good)
	f.Add([]byte(`{"format": 1, "crc32c": 5, "agreed": []}`))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		var got sample
		err := spec.Decode("f", data, &got, func([]byte) error { return nil })
		var se *Error
		if err != nil && !errors.As(err, &se) {
			t.Fatalf("%q: %v is not an *Error", data, err)
		}
	})
}

// TestSpecReadsOlderVersions: a version in Reads is decoded as it is; one
// neither current nor in Reads is refused, naming the version read.
func TestSpecReadsOlderVersions(t *testing.T) {
	older := Spec{Format: "walshadow-test", Version: 2}
	current := Spec{Format: "walshadow-test", Version: 3, Reads: []int{2}}
	body := map[string]int{"n": 7}
	for _, tc := range []struct {
		write Spec
		ok    bool
	}{{older, true}, {current, true}, {Spec{Format: "walshadow-test", Version: 1}, false}, {Spec{Format: "walshadow-test", Version: 4}, false}} {
		b, err := tc.write.Encode(body)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]int
		err = current.Decode("f.json", b, &got, nil)
		if tc.ok && (err != nil || got["n"] != 7) {
			t.Errorf("version %d: %v, %v", tc.write.Version, got, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), fmt.Sprintf("version %d, this walshadow reads version 3", tc.write.Version))) {
			t.Errorf("version %d: %v, want it refused", tc.write.Version, err)
		}
	}
}
