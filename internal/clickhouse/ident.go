package clickhouse

import (
	"fmt"
	"strings"
)

// maxEscapedNameBytes bounds a database, table or column name after
// ClickHouse's escapeForFileName (every byte outside [A-Za-z0-9_] becomes
// %XX): the name is a directory or file name on the server, and suffixes
// such as ".sql.tmp", ".null.bin", ".size0.mrk2" must still fit NAME_MAX
// (255). 18.16 fails a 255-byte table name with "Bad path syntax".
const maxEscapedNameBytes = 200

// maxTableNameBytes bounds a table's own name so that the names of its
// load's side tables (internal/load: "<table>__wsreplaced_<oid>", 23
// bytes at most after it) stay within maxEscapedNameBytes.
const maxTableNameBytes = maxEscapedNameBytes - 23

// ValidateTableName is ValidateName for the name of a table the output
// writes, which leaves room for its load's side tables.
func ValidateTableName(what, name string) error {
	if err := ValidateName(what, name); err != nil {
		return err
	}
	if n := escapedLen(name); n > maxTableNameBytes {
		return fmt.Errorf("%s: name %q is %d bytes once escaped for ClickHouse's file names (limit %d for a table, which leaves room for its initial load's side tables); map it to a shorter target name",
			what, name, n, maxTableNameBytes)
	}
	return nil
}

// QuoteIdent quotes name as a ClickHouse identifier: backticks, with
// backtick and backslash escaped by a backslash and control characters
// as \xHH (ClickHouse reads the same escapes in a backquoted identifier
// as in a string literal). Any byte string comes out as one identifier
// that reads back as exactly name; ValidateName decides whether
// ClickHouse can store it.
func QuoteIdent(name string) string {
	return quoteIdent(name, false)
}

// quoteIdentOpaque is QuoteIdent with every byte outside [A-Za-z0-9_]
// (and below 0x80) written as \xHH: the identifier holds no space,
// parenthesis, comma, quote or dot. It is for statements a client parses
// before the server does (clickhouse-go reads an INSERT's table and
// column list with regular expressions that stop at the first
// parenthesis and strip backticks without unescaping): the server reads
// the same name either way.
func quoteIdentOpaque(name string) string {
	return quoteIdent(name, true)
}

func quoteIdent(name string, opaque bool) string {
	const hexDigits = "0123456789abcdef"
	var b strings.Builder
	b.Grow(len(name) + 2)
	b.WriteByte('`')
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c < 0x20 || c == 0x7f || opaque && c < 0x80 && !wordByte(c):
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		case c == '`' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('`')
	return b.String()
}

// wordByte: an ASCII letter, digit or underscore, the bytes ClickHouse
// keeps as they are in file names and regular expressions read as \w.
func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// QuoteQualified is `db`.`table`.
func QuoteQualified(t Target) string { return QuoteIdent(t.Database) + "." + QuoteIdent(t.Table) }

// ValidateName checks that name can name a ClickHouse database, table or
// column: non-empty (ClickHouse's parser has no empty identifier) and
// short enough once escaped for the file system. Any other byte string is
// a name ClickHouse holds (control characters and bytes that are not
// UTF-8 included: checked on 18.16). what says where the name comes from
// (e.g. `column "a" of relation public.t`) for the error.
func ValidateName(what, name string) error {
	if name == "" {
		return fmt.Errorf("%s: empty name cannot reach ClickHouse", what)
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
		if wordByte(name[i]) {
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
// part escaped as %25 and %2E (and the second '_' of a side-table marker
// as %5F: namePartEscaper), so the first '.' always separates the parts
// and distinct (schema, table) pairs never share a name ("a.b"."c" is
// "a%2Eb.c", "a"."b.c" is "a.b%2Ec"). Ordinary names read as themselves:
// public.orders stays "public.orders". The result is one identifier (a dot
// inside backticks is legal): `db`.`public.orders`. A name too long for
// ClickHouse's file names is shortened with a hash of the whole (fitName),
// which keeps distinct pairs apart.
func DefaultTableName(schema, table string) string {
	s, t := escapeNamePart(schema), escapeNamePart(table)
	const dot = 3 // escaped
	if room := maxTableNameBytes - dot; escapedLen(s)+escapedLen(t) > room {
		half := room / 2
		switch {
		case escapedLen(s) <= half:
			t = fitName(t, room-escapedLen(s))
		case escapedLen(t) <= half:
			s = fitName(s, room-escapedLen(t))
		default:
			s, t = fitName(s, half), fitName(t, room-half)
		}
	}
	return s + "." + t
}

func escapeNamePart(s string) string {
	if !strings.ContainsAny(s, ".%") && !strings.Contains(s, "__") {
		return s
	}
	return namePartEscaper.Replace(s)
}

// namePartEscaper escapes '%' and '.', and the start of the markers the
// output's side tables append to a table's name ("__ws...": a load's
// staging, delta and stale tables, a refill's; "__rekey"), so a source
// table's default name never equals another table's side table (a table
// named "orders__rekey" would otherwise be dropped by the rekey of
// "orders").
var namePartEscaper = strings.NewReplacer("%", "%25", ".", "%2E", "__ws", "_%5Fws", "__rekey", "_%5Frekey")
