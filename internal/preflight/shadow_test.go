package preflight

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/testrig"
)

// only returns the single finding of check in r, failing the test
// otherwise.
func only(t *testing.T, r Report, check string) Finding {
	t.Helper()
	got := r.Find(check)
	if len(got) != 1 {
		t.Fatalf("%d %s findings, want 1:\n%s", len(got), check, r)
	}
	return got[0]
}

func TestBridgeModuleNotELF(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, BridgeModuleFile), []byte("#!/bin/sh\necho not a module\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var fs findings
	fs.checkBridge(dir, "/usr/lib/postgresql/15/bin", nil)
	f := only(t, fs.r, "bridge_module")
	if f.Severity != Error || !strings.Contains(f.Detail, "is not an ELF file") || !strings.Contains(f.Detail, filepath.Join(dir, BridgeModuleFile)) {
		t.Fatalf("finding %+v", f)
	}
	if !strings.Contains(f.Remedy, "make -C pgext PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config") {
		t.Fatalf("remedy %q", f.Remedy)
	}
}

func TestBridgeModuleMissing(t *testing.T) {
	var fs findings
	fs.checkBridge(t.TempDir(), "/usr/lib/postgresql/15/bin", nil)
	if f := only(t, fs.r, "bridge_module"); f.Severity != Error || !strings.Contains(f.Detail, "does not exist") {
		t.Fatalf("finding %+v", f)
	}
}

func TestBridgeModuleELFWithoutModuleSymbols(t *testing.T) {
	// A PIE executable is an ET_DYN ELF like a shared object, but exports
	// no magic block.
	postgres := filepath.Join(testrig.PGBinDir(t), "postgres")
	problem := inspectModule(postgres)
	if !strings.Contains(problem, "Pg_magic_func") && !strings.Contains(problem, "not a shared object") {
		t.Fatalf("inspectModule(%s) = %q", postgres, problem)
	}
}

func TestBridgeModuleBuilt(t *testing.T) {
	bin := testrig.PGBinDir(t)
	dir := testrig.BuildPgext(t, bin)
	if problem := inspectModule(filepath.Join(dir, BridgeModuleFile)); problem != "" {
		t.Fatalf("built module: %s", problem)
	}
	var fs findings
	fs.checkBridge(dir, bin, fs.checkShadowOSUser(defaultShadowOSUser))
	if f := only(t, fs.r, "bridge_module"); f.Severity != Info {
		t.Fatalf("built module: %+v", f)
	}
}

// fakeBinDir holds scripts standing in for the shadow's binaries, postgres
// claiming major.
func fakeBinDir(t *testing.T, major string) string {
	dir := t.TempDir()
	for _, name := range shadowBinaries {
		script := "#!/bin/sh\nexit 0\n"
		if name == "postgres" {
			script = "#!/bin/sh\necho 'postgres (PostgreSQL) " + major + ".2 (Debian)'\n"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestShadowMajorMismatch(t *testing.T) {
	dir := fakeBinDir(t, "16")
	var fs findings
	fs.checkShadowBinaries(context.Background(), dir, 15)
	if f := only(t, fs.r, "shadow_bin_dir"); f.Severity != Info {
		t.Fatalf("bin dir: %+v", f)
	}
	f := only(t, fs.r, "shadow_major")
	if f.Severity != Error || !strings.Contains(f.Detail, "PostgreSQL 16") || !strings.Contains(f.Detail, "source is PostgreSQL 15") ||
		!strings.Contains(f.Remedy, "install postgresql-15") {
		t.Fatalf("finding %+v", f)
	}

	fs = findings{}
	fs.checkShadowBinaries(context.Background(), fakeBinDir(t, "15"), 15)
	if f := only(t, fs.r, "shadow_major"); f.Severity != Info {
		t.Fatalf("same major: %+v", f)
	}
}

func TestShadowBinDirLacksPrograms(t *testing.T) {
	dir := fakeBinDir(t, "15")
	os.Remove(filepath.Join(dir, "pg_controldata"))
	os.Chmod(filepath.Join(dir, "initdb"), 0o644)
	var fs findings
	fs.checkShadowBinaries(context.Background(), dir, 15)
	f := only(t, fs.r, "shadow_bin_dir")
	if f.Severity != Error || !strings.Contains(f.Detail, dir) || !strings.Contains(f.Detail, "initdb, pg_controldata") {
		t.Fatalf("finding %+v", f)
	}
}

func TestStateDirUnreachableForShadowUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the shadow runs as walshadow's own user when not root")
	}
	if _, err := user.Lookup(defaultShadowOSUser); err != nil {
		t.Skip("no postgres OS user")
	}
	// Not t.TempDir: its parent is owner-only and would be the one blocking.
	closed, err := os.MkdirTemp("", "walshadow-preflight-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(closed) })
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	var fs findings
	u := fs.checkShadowOSUser(defaultShadowOSUser)
	state := filepath.Join(closed, "state")
	fs.checkStateDir(state, u)
	f := only(t, fs.r, "state_dir")
	if f.Severity != Error || !strings.Contains(f.Detail, "may not search "+closed+" ") || !strings.Contains(f.Remedy, "chmod o+x "+closed) {
		t.Fatalf("finding %+v", f)
	}

	if err := os.Chmod(closed, 0o711); err != nil {
		t.Fatal(err)
	}
	fs = findings{}
	fs.checkStateDir(state, u)
	if f := only(t, fs.r, "state_dir"); f.Severity != Info || !strings.Contains(f.Detail, "does not exist yet") {
		t.Fatalf("after chmod o+x: %+v", f)
	}
}

func TestShadowOSUserMissing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("os_user is only looked up under root")
	}
	var fs findings
	if u := fs.checkShadowOSUser("walshadow_no_such_user"); u != nil {
		t.Fatalf("returned %+v", u)
	}
	if f := only(t, fs.r, "shadow_os_user"); f.Severity != Error || !strings.Contains(f.Detail, "walshadow_no_such_user") {
		t.Fatalf("finding %+v", f)
	}
}
