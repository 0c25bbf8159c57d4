package clickhouse

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxEscapedNameBytes bounds a database, table or column name after
// ClickHouse's escapeForFileName (every byte outside [A-Za-z0-9_] becomes
// %XX): the name is a directory or file name on the server, and suffixes
// such as ".sql.tmp", ".null.bin", ".size0.mrk2" must still fit NAME_MAX
// (255). 18.16 fails a 255-byte table name with "Bad path syntax".
const maxEscapedNameBytes = 200

// QuoteIdent quotes name as a ClickHouse identifier: backticks, with
// backtick and backslash escaped by a backslash. Any byte string comes out
// as one identifier; ValidateName decides whether ClickHouse can store it.
func QuoteIdent(name string) string {
	var b strings.Builder
	b.Grow(len(name) + 2)
	b.WriteByte('`')
	for i := 0; i < len(name); i++ {
		switch c := name[i]; c {
		case '`', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('`')
	return b.String()
}

// QuoteQualified is `db`.`table`.
func QuoteQualified(t Target) string { return QuoteIdent(t.Database) + "." + QuoteIdent(t.Table) }

// ValidateName checks that name can name a ClickHouse database, table or
// column: non-empty, valid UTF-8, no NUL or other control characters, and
// short enough once escaped for the file system. what says where the name
// comes from (e.g. `column "a" of relation public.t`) for the error.
func ValidateName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%s: empty name cannot reach ClickHouse", what)
	case !utf8.ValidString(name):
		return fmt.Errorf("%s: name %q is not valid UTF-8", what, name)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%s: name %q contains control character %U", what, name, r)
		}
	}
	if n := escapedLen(name); n > maxEscapedNameBytes {
		return fmt.Errorf("%s: name %q is %d bytes once escaped for ClickHouse's file names (limit %d); map it to a shorter target name",
			what, name, n, maxEscapedNameBytes)
	}
	return nil
}

// escapedLen is len(escapeForFileName(name)) as ClickHouse computes it.
func escapedLen(name string) int {
	n := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' {
			n++
		} else {
			n += 3
		}
	}
	return n
}

// Target is where one source relation lands.
type Target struct {
	Database string
	Table    string
}

// Validate checks both names, naming the source relation in errors.
func (t Target) Validate(source string) error {
	if err := ValidateName(fmt.Sprintf("target database of %s", source), t.Database); err != nil {
		return err
	}
	return ValidateName(fmt.Sprintf("target table of %s", source), t.Table)
}

// DefaultTarget is the default naming: database is the configured
// ClickHouse database, table is DefaultTableName(schema, table). One
// configured database holds one source database's relations; replicating
// several source databases means one ClickHouse database each.
func DefaultTarget(database, schema, table string) Target {
	return Target{Database: database, Table: DefaultTableName(schema, table)}
}

// DefaultTableName is "<schema>.<table>" with '%' and '.' inside either
// part escaped as %25 and %2E, so the first '.' always separates the parts
// and distinct (schema, table) pairs never share a name ("a.b"."c" is
// "a%2Eb.c", "a"."b.c" is "a.b%2Ec"). Ordinary names read as themselves:
// public.orders stays "public.orders". The result is one identifier (a dot
// inside backticks is legal): `db`.`public.orders`.
func DefaultTableName(schema, table string) string {
	return escapeNamePart(schema) + "." + escapeNamePart(table)
}

func escapeNamePart(s string) string {
	if !strings.ContainsAny(s, ".%") {
		return s
	}
	return strings.NewReplacer("%", "%25", ".", "%2E").Replace(s)
}
