package shadow

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
)

// DefaultOSUser is the OS user PostgreSQL runs as when walshadow runs as
// root (PostgreSQL refuses root).
const DefaultOSUser = "postgres"

// osUser is the OS user that owns the shadow's files and runs its server
// binaries. When it is the user walshadow runs as, commands run directly;
// otherwise (walshadow is root) through runuser.
type osUser struct {
	name     string
	uid, gid int
	// self is true when walshadow itself runs as this user.
	self bool
}

// lookupOSUser resolves name ("" means postgres under root, else the current
// user). A non-root walshadow can only run the server as itself.
func lookupOSUser(name string) (*osUser, error) {
	current, err := user.Current()
	if err != nil {
		return nil, fmt.Errorf("looking up the current OS user: %w", err)
	}
	root := os.Geteuid() == 0
	if name == "" {
		if root {
			name = DefaultOSUser
		} else {
			name = current.Username
		}
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("looking up OS user %q for the shadow: %w", name, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("OS user %q: %w", name, err)
	}
	ou := &osUser{name: name, uid: uid, gid: gid, self: uid == os.Geteuid()}
	if ou.self && uid == 0 {
		return nil, errors.New("the shadow's OS user is root, which PostgreSQL refuses: set os_user to an unprivileged user (usually postgres)")
	}
	if !ou.self && !root {
		return nil, fmt.Errorf("walshadow runs as %s and cannot run PostgreSQL as %s: run walshadow as root or set os_user to %s",
			current.Username, name, current.Username)
	}
	return ou, nil
}

// chown gives path to the user; a no-op when walshadow is that user.
func (u *osUser) chown(path string) error {
	if u.self {
		return nil
	}
	if err := os.Lchown(path, u.uid, u.gid); err != nil {
		return fmt.Errorf("chown %s to %s: %w", path, u.name, err)
	}
	return nil
}

// command builds a command that runs bin as the user, in dir, with the
// environment cleaned of PG* variables (they would redirect pg_ctl and
// friends) and LC_ALL=C (pg_controldata's labels and the server's messages
// must be the English ones the parsers and error reports expect).
func (u *osUser) command(ctx context.Context, dir, bin string, args ...string) *exec.Cmd {
	var cmd *exec.Cmd
	if u.self {
		cmd = exec.CommandContext(ctx, bin, args...)
	} else {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", u.name, "--", bin}, args...)...)
	}
	cmd.Dir = dir
	cmd.Env = serverEnv()
	return cmd
}

func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "LC_") || strings.HasPrefix(kv, "LANG=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C")
}

// runOutput runs cmd and returns its combined output; the error names the
// command and carries its output, which is what an operator needs.
func runOutput(cmd *exec.Cmd) (string, error) {
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
