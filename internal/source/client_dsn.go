package source

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// clientRedactedMark replaces secrets in error texts.
const clientRedactedMark = "xxxxx"

// clientMinScrubLen is the shortest secret scrubbed from error texts: a
// shorter one would mangle ordinary words, and pgconn never echoes
// passwords anyway (the scrub is a second line of defence).
const clientMinScrubLen = 4

// RedactDSN returns a password-free description of a connection string for
// logs and errors: host(s), port(s), user and database as pgconn parses them
// (environment defaults included). It is built from the parsed fields rather
// than by masking the text, so no spelling of a password (userinfo, query
// parameter, quoted keyword value, percent-encoded key) can leak through;
// a string that does not parse is not shown at all.
func RedactDSN(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "[connection string not shown: it does not parse]"
	}
	return clientDescribeConfig(cfg)
}

// clientDescribeConfig renders the non-secret connection target of cfg.
func clientDescribeConfig(cfg *pgconn.Config) string {
	hosts := []string{clientHostPort(cfg.Host, cfg.Port)}
	for _, fb := range cfg.Fallbacks {
		hp := clientHostPort(fb.Host, fb.Port)
		if hp != hosts[len(hosts)-1] {
			hosts = append(hosts, hp)
		}
	}
	return fmt.Sprintf("host=%s user=%s database=%s", strings.Join(hosts, ","), cfg.User, cfg.Database)
}

func clientHostPort(host string, port uint16) string {
	if strings.HasPrefix(host, "/") {
		return fmt.Sprintf("%s/.s.PGSQL.%d", host, port)
	}
	if strings.Contains(host, ":") {
		return fmt.Sprintf("[%s]:%d", host, port)
	}
	return fmt.Sprintf("%s:%d", host, port)
}

// clientScrubbedError carries an error whose text has secrets replaced; it
// still unwraps to the original, so errors.As and the transient-error
// classification see through it.
type clientScrubbedError struct {
	err     error
	secrets []string
}

func (e *clientScrubbedError) Error() string {
	msg := e.err.Error()
	for _, s := range e.secrets {
		msg = strings.ReplaceAll(msg, s, clientRedactedMark)
	}
	return msg
}

func (e *clientScrubbedError) Unwrap() error { return e.err }

// clientScrub wraps err so its text never contains any of secrets (those of
// at least clientMinScrubLen bytes). nil stays nil.
func clientScrub(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	var keep []string
	for _, s := range secrets {
		if len(s) >= clientMinScrubLen {
			keep = append(keep, s)
		}
	}
	if len(keep) == 0 {
		return err
	}
	return &clientScrubbedError{err: err, secrets: keep}
}

// clientParseError reports a connection string that does not parse without
// keeping pgconn's error in the chain: its ParseConfigError exposes the raw
// string (password included) in a public field.
func clientParseError(dsn string, err error) error {
	msg := "invalid syntax"
	var pce *pgconn.ParseConfigError
	if errors.As(err, &pce) {
		// Its Error() redacts on a best-effort basis; strip the quoted
		// string entirely and keep only the reason after it.
		text := pce.Error()
		if i := strings.LastIndex(text, "`: "); i >= 0 {
			msg = text[i+3:]
		}
	}
	return fmt.Errorf("parsing the source connection string %s: %s", RedactDSN(dsn), msg)
}

// clientValidateSlotName applies PostgreSQL's rule for replication slot
// names (ReplicationSlotValidateName): 1 to 63 characters from [a-z0-9_].
// Checking up front gives a clear error before any connection is made.
func clientValidateSlotName(name string) error {
	if name == "" {
		return fmt.Errorf("replication slot name is empty")
	}
	if len(name) > 63 {
		return fmt.Errorf("replication slot name %q is longer than 63 characters", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return fmt.Errorf("replication slot name %q may contain only lower case letters, digits and underscores", name)
		}
	}
	return nil
}

// clientSettingBytes converts a pg_settings (setting, unit) pair of a memory
// parameter to bytes, e.g. ("2048", "8kB") or ("16777216", "B").
func clientSettingBytes(setting, unit string) (uint64, error) {
	v, err := strconv.ParseUint(setting, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("setting %q is not a non-negative integer", setting)
	}
	mult, base, err := clientSplitUnit(unit)
	if err != nil {
		return 0, err
	}
	var scale uint64
	switch base {
	case "B":
		scale = 1
	case "kB":
		scale = 1 << 10
	case "MB":
		scale = 1 << 20
	case "GB":
		scale = 1 << 30
	case "TB":
		scale = 1 << 40
	default:
		return 0, fmt.Errorf("unit %q is not a memory unit", unit)
	}
	return v * mult * scale, nil
}

// clientSettingDuration converts a pg_settings (setting, unit) pair of a
// time parameter to a duration, e.g. ("60000", "ms"). Negative settings
// (-1 = disabled for some parameters) are returned as is, scaled.
func clientSettingDuration(setting, unit string) (time.Duration, error) {
	v, err := strconv.ParseInt(setting, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("setting %q is not an integer", setting)
	}
	mult, base, err := clientSplitUnit(unit)
	if err != nil {
		return 0, err
	}
	var scale time.Duration
	switch base {
	case "us":
		scale = time.Microsecond
	case "ms":
		scale = time.Millisecond
	case "s":
		scale = time.Second
	case "min":
		scale = time.Minute
	case "h":
		scale = time.Hour
	case "d":
		scale = 24 * time.Hour
	default:
		return 0, fmt.Errorf("unit %q is not a time unit", unit)
	}
	return time.Duration(v) * time.Duration(mult) * scale, nil
}

// clientSplitUnit splits a pg_settings unit such as "8kB" into 8 and "kB".
func clientSplitUnit(unit string) (uint64, string, error) {
	i := 0
	for i < len(unit) && unit[i] >= '0' && unit[i] <= '9' {
		i++
	}
	mult := uint64(1)
	if i > 0 {
		m, err := strconv.ParseUint(unit[:i], 10, 32)
		if err != nil || m == 0 {
			return 0, "", fmt.Errorf("bad unit %q", unit)
		}
		mult = m
	}
	if i == len(unit) {
		return 0, "", fmt.Errorf("bad unit %q", unit)
	}
	return mult, unit[i:], nil
}
