package preflight

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// shadowBinaries are the server programs the shadow runs.
var shadowBinaries = []string{"postgres", "initdb", "pg_ctl", "pg_controldata"}

// defaultShadowOSUser is the shadow's OS user under a root walshadow when
// none is configured (shadow.DefaultOSUser).
const defaultShadowOSUser = "postgres"

const versionTimeout = 10 * time.Second

// postgresVersion matches `postgres --version`: "postgres (PostgreSQL) 15.8 (Debian 15.8-1)".
var postgresVersion = regexp.MustCompile(`\(PostgreSQL\) (\d+)`)

func installRemedy(major int) string {
	if major == 0 {
		major = defaultMajor
	}
	remedy := fmt.Sprintf("install postgresql-%d and set shadow.bin_dir to its bin directory (e.g. /usr/lib/postgresql/%d/bin)", major, major)
	if major == 17 || major == 18 {
		// Debian 12 has no package of either; pgmajor.sh lays one out.
		remedy += fmt.Sprintf("; on Debian 12, sudo scripts/pgmajor.sh %d prints the bin directory to use", major)
	}
	return remedy
}

// checkShadowBinaries checks binDir holds the shadow's programs and that
// their major is the source's (sourceMajor 0: unknown, not compared).
func (fs *findings) checkShadowBinaries(ctx context.Context, binDir string, sourceMajor int) {
	if binDir == "" {
		fs.fail("shadow_bin_dir", "shadow.bin_dir is empty", installRemedy(sourceMajor))
		return
	}
	if fi, err := os.Stat(binDir); err != nil || !fi.IsDir() {
		what := "is not a directory"
		if err != nil {
			what = describeStatErr(err)
		}
		fs.fail("shadow_bin_dir", fmt.Sprintf("shadow.bin_dir %s %s; skipped shadow_major", binDir, what), installRemedy(sourceMajor))
		return
	}
	var missing []string
	for _, name := range shadowBinaries {
		fi, err := os.Stat(filepath.Join(binDir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		fs.fail("shadow_bin_dir", fmt.Sprintf("shadow.bin_dir %s lacks executable %s (the shadow needs %s)", binDir,
			strings.Join(missing, ", "), strings.Join(shadowBinaries, ", ")), installRemedy(sourceMajor))
	} else {
		fs.info("shadow_bin_dir", fmt.Sprintf("shadow.bin_dir %s has %s", binDir, strings.Join(shadowBinaries, ", ")))
	}
	postgres := filepath.Join(binDir, "postgres")
	if fi, err := os.Stat(postgres); err != nil || !fi.Mode().IsRegular() {
		return // already reported
	}
	// --version is answered before PostgreSQL's refusal to run as root.
	vctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	cmd := exec.CommandContext(vctx, postgres, "--version")
	cmd.Env = []string{"LC_ALL=C", "PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		fs.fail("shadow_major", fmt.Sprintf("running %s --version: %v", postgres, err), installRemedy(sourceMajor))
		return
	}
	version := strings.TrimSpace(string(out))
	m := postgresVersion.FindStringSubmatch(version)
	if m == nil {
		fs.fail("shadow_major", fmt.Sprintf("%s --version printed %q, not a PostgreSQL version", postgres, version), installRemedy(sourceMajor))
		return
	}
	major, _ := strconv.Atoi(m[1])
	switch {
	case sourceMajor == 0:
		fs.warn("shadow_major", fmt.Sprintf("shadow binaries are PostgreSQL %d (%s); the source's major is unknown (no connection), so not compared", major, version),
			"they must be the source's major version")
	case major != sourceMajor:
		fs.fail("shadow_major", fmt.Sprintf("shadow binaries in %s are PostgreSQL %d but the source is PostgreSQL %d: a standby must run the source's major", binDir, major, sourceMajor),
			installRemedy(sourceMajor))
	default:
		fs.info("shadow_major", fmt.Sprintf("shadow binaries are PostgreSQL %d, as the source", major))
	}
}

// runAs is the OS user the shadow runs as, for permission checks.
type runAs struct {
	name string
	uid  int
	gids []int
}

// checkShadowOSUser mirrors the shadow's choice of OS user: under root the
// configured user (postgres by default), which must exist and not be root;
// otherwise walshadow's own user, which os_user must then name (or leave
// empty). It returns the user, nil when there is none to run as.
func (fs *findings) checkShadowOSUser(name string) *runAs {
	current, err := user.Current()
	if err != nil {
		fs.fail("shadow_os_user", fmt.Sprintf("looking up the current OS user: %v", err), "")
		return nil
	}
	if os.Geteuid() != 0 {
		if name != "" && name != current.Username {
			fs.fail("shadow_os_user", fmt.Sprintf("walshadow runs as %s and cannot run the shadow as shadow.os_user %s", current.Username, name),
				fmt.Sprintf("run walshadow as root, or set shadow.os_user to %s", current.Username))
			return nil
		}
		fs.info("shadow_os_user", fmt.Sprintf("the shadow runs as walshadow's own OS user %s", current.Username))
		return lookupRunAs(current)
	}
	if name == "" {
		name = defaultShadowOSUser
	}
	u, err := user.Lookup(name)
	if err != nil {
		fs.fail("shadow_os_user", fmt.Sprintf("walshadow runs as root and the shadow's OS user %s does not exist (PostgreSQL refuses to run as root)", name),
			"create the user (the postgresql package creates postgres) or set shadow.os_user to an existing unprivileged user")
		return nil
	}
	if u.Uid == "0" {
		fs.fail("shadow_os_user", fmt.Sprintf("shadow.os_user %s is root, which PostgreSQL refuses", name),
			"set shadow.os_user to an unprivileged user (usually postgres)")
		return nil
	}
	ra := lookupRunAs(u)
	if ra == nil {
		fs.fail("shadow_os_user", fmt.Sprintf("OS user %s has a non-numeric uid %q", name, u.Uid), "")
		return nil
	}
	fs.info("shadow_os_user", fmt.Sprintf("the shadow runs as OS user %s (uid %d)", name, ra.uid))
	return ra
}

func lookupRunAs(u *user.User) *runAs {
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return nil
	}
	ra := &runAs{name: u.Username, uid: uid}
	ids, _ := u.GroupIds()
	if len(ids) == 0 {
		ids = []string{u.Gid}
	}
	for _, id := range ids {
		if gid, err := strconv.Atoi(id); err == nil {
			ra.gids = append(ra.gids, gid)
		}
	}
	return ra
}

// Permission bits for may.
const (
	permRead   = 4
	permSearch = 1
)

// may reports whether u may read (permRead) or search (permSearch) the file
// fi by its mode bits, as the kernel decides without ACLs: the owner's
// bits if u owns it, else the group's if u is in its group, else others'.
func (u *runAs) may(fi os.FileInfo, perm uint32) bool {
	if u.uid == 0 {
		return true
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true // not a unix file system: nothing to tell
	}
	mode := uint32(fi.Mode().Perm())
	switch {
	case int(st.Uid) == u.uid:
		return mode>>6&perm != 0
	case containsInt(u.gids, int(st.Gid)):
		return mode>>3&perm != 0
	}
	return mode&perm != 0
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// blockedAncestor returns the first existing directory on the way to
// target (target included when it is a directory) that u cannot search,
// "" when none.
func (u *runAs) blockedAncestor(target string) (string, os.FileInfo) {
	dir := "/"
	parts := strings.Split(strings.TrimPrefix(filepath.Clean(target), "/"), "/")
	for i := 0; i <= len(parts); i++ {
		if i > 0 {
			dir = filepath.Join(dir, parts[i-1])
		}
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() {
			return "", nil
		}
		if !u.may(fi, permSearch) {
			return dir, fi
		}
	}
	return "", nil
}

func describeMode(fi os.FileInfo) string {
	owner := "?"
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		owner = strconv.Itoa(int(st.Uid))
		if u, err := user.LookupId(owner); err == nil {
			owner = u.Username
		}
	}
	return fmt.Sprintf("mode %04o, owner %s", fi.Mode().Perm(), owner)
}

func describeStatErr(err error) string {
	if errors.Is(err, os.ErrNotExist) {
		return "does not exist"
	}
	return err.Error()
}

// checkStateDir checks the shadow's OS user can reach state_dir: the shadow
// lives under it, so every directory on the way must be searchable by it.
func (fs *findings) checkStateDir(stateDir string, u *runAs) {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		fs.fail("state_dir", fmt.Sprintf("resolving state_dir %s: %v", stateDir, err), "")
		return
	}
	fi, err := os.Stat(abs)
	switch {
	case err == nil && !fi.IsDir():
		fs.fail("state_dir", fmt.Sprintf("state_dir %s is not a directory", abs), "point state_dir at a directory")
		return
	case err != nil && !errors.Is(err, os.ErrNotExist):
		fs.fail("state_dir", fmt.Sprintf("state_dir %s: %v", abs, err), "")
		return
	}
	if u == nil {
		return // the OS user finding says why
	}
	if dir, dfi := u.blockedAncestor(abs); dir != "" {
		fs.fail("state_dir", fmt.Sprintf("the shadow's OS user %s cannot reach state_dir %s: it may not search %s (%s)", u.name, abs, dir, describeMode(dfi)),
			fmt.Sprintf("put state_dir where %s can reach it, or chmod o+x %s", u.name, dir))
		return
	}
	if err != nil {
		fs.info("state_dir", fmt.Sprintf("state_dir %s does not exist yet; walshadow creates it", abs))
		return
	}
	fs.info("state_dir", fmt.Sprintf("state_dir %s is reachable by OS user %s", abs, u.name))
}
