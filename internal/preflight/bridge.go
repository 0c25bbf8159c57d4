package preflight

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// BridgeModuleFile is the bridge module's file name in
// shadow.bridge_library_dir.
const BridgeModuleFile = "walshadow.so"

// bridgeSymbols are the functions PostgreSQL looks up when it loads a
// module: the magic block (version check) and the initialiser.
var bridgeSymbols = []string{"Pg_magic_func", "_PG_init"}

// elfMachines maps GOARCH to the ELF machine of this process, so a module
// built for another architecture is refused.
var elfMachines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "386": elf.EM_386,
	"ppc64le": elf.EM_PPC64, "s390x": elf.EM_S390, "riscv64": elf.EM_RISCV,
}

// checkBridge checks the bridge module is loadable, which here means: the
// file exists, the shadow's OS user can read it, and it is an ELF shared
// object for this machine exporting Pg_magic_func and _PG_init. Whether its
// magic block matches the shadow's major only the server can tell, when it
// loads it (the session's start-up check of the bridge).
func (fs *findings) checkBridge(libDir, binDir string, u *runAs) {
	remedy := fmt.Sprintf("build it with make -C pgext PG_CONFIG=%s and set shadow.bridge_library_dir to the directory holding %s",
		filepath.Join(binDir, "pg_config"), BridgeModuleFile)
	dir, err := filepath.Abs(libDir)
	if err != nil {
		fs.fail("bridge_module", fmt.Sprintf("resolving shadow.bridge_library_dir %s: %v", libDir, err), remedy)
		return
	}
	path := filepath.Join(dir, BridgeModuleFile)
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		fs.fail("bridge_module", fmt.Sprintf("bridge module %s %s", path, describeStatErr(err)), remedy)
		return
	case !fi.Mode().IsRegular():
		fs.fail("bridge_module", fmt.Sprintf("bridge module %s is not a regular file", path), remedy)
		return
	}
	if u != nil {
		if blocked, bfi := u.blockedAncestor(dir); blocked != "" {
			fs.fail("bridge_module", fmt.Sprintf("the shadow's OS user %s cannot reach bridge module %s: it may not search %s (%s)", u.name, path, blocked, describeMode(bfi)),
				fmt.Sprintf("put the module where %s can read it, or chmod o+x %s", u.name, blocked))
			return
		}
		if !u.may(fi, permRead) {
			fs.fail("bridge_module", fmt.Sprintf("the shadow's OS user %s cannot read bridge module %s (%s)", u.name, path, describeMode(fi)),
				fmt.Sprintf("chmod a+r %s", path))
			return
		}
	}
	if problem := inspectModule(path); problem != "" {
		fs.fail("bridge_module", fmt.Sprintf("bridge module %s %s", path, problem), remedy)
		return
	}
	fs.info("bridge_module", fmt.Sprintf("bridge module %s is an ELF shared object exporting %s", path, strings.Join(bridgeSymbols, " and ")))
}

// inspectModule returns what makes path unloadable as a PostgreSQL module,
// "" when nothing does.
func inspectModule(path string) string {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Sprintf("is not an ELF file (%v)", err)
	}
	defer f.Close()
	if f.Type != elf.ET_DYN {
		return fmt.Sprintf("is an ELF %s, not a shared object", f.Type)
	}
	if want, ok := elfMachines[runtime.GOARCH]; ok && f.Machine != want {
		return fmt.Sprintf("is built for %s, not this machine's %s", f.Machine, want)
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		return fmt.Sprintf("has no dynamic symbol table (%v)", err)
	}
	defined := make(map[string]bool, len(syms))
	for _, s := range syms {
		if s.Section != elf.SHN_UNDEF && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			defined[s.Name] = true
		}
	}
	var missing []string
	for _, name := range bridgeSymbols {
		if !defined[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return "does not export " + strings.Join(missing, " and ") + ": it is not a PostgreSQL module"
	}
	return ""
}
