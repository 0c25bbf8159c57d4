package session

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/source"
	"github.com/walshadow/walshadow/internal/testrig"
)

// A state directory built from one source refuses another: the error names
// both identities and the remedy, and nothing of the state is rewritten.
func TestSessionRefusesAnotherSource(t *testing.T) {
	first := testrig.StartPostgres(t)
	other := testrig.StartPostgres(t)
	dir := stateDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	s := New(sessionConfig(t, first, dir), nil, nil)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	consume(t, s)
	first.Exec(t, "CREATE TABLE id_t (id int PRIMARY KEY); INSERT INTO id_t VALUES (1)")
	waitCaughtUp(t, s, first, 2*time.Minute)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m, err := ReadManifest(dir); err == nil && m != nil && m.Delivered != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no manifest with a delivered position")
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.Close(context.Background())

	snapshot := func() map[string][]byte {
		files := map[string][]byte{}
		for _, rel := range []string{ManifestFile, "shadow/walshadow.bootstrap_complete", "desclog/desc_log.ckpt", "desclog/desc_log.tail"} {
			b, err := os.ReadFile(filepath.Join(dir, rel))
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			files[rel] = b
		}
		return files
	}
	before := snapshot()

	cfg := sessionConfig(t, other, dir)
	s2 := New(cfg, nil, nil)
	err := s2.Start(ctx)
	// The refusal is sticky: a second Start returns it again without work.
	err2 := s2.Start(ctx)
	s2.Close(context.Background())
	var mismatch *source.IdentityMismatchError
	if err == nil || !IsPermanent(err) || !errors.As(err, &mismatch) {
		t.Fatalf("start against another source: %v (permanent %v)", err, err != nil && IsPermanent(err))
	}
	for _, want := range []string{dir, "different PostgreSQL cluster", "fresh state directory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	for rel, b := range snapshot() {
		if !bytes.Equal(b, before[rel]) {
			t.Errorf("%s changed by the refused start", rel)
		}
	}
	if err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("second start: %v", err2)
	}
}
