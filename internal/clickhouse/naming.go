package clickhouse

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Names PostgreSQL accepts that ClickHouse would not read back as the
// same column get a deterministic ClickHouse name instead of a refused
// table (tables.<name>.column_names overrides it, and is refused when it
// makes one of these collisions itself):
//
//   - a column whose name is one of walshadow's synthetic columns (_lsn,
//     _xid, _is_deleted, _seq, _filenode, _block, _offset, the commit
//     time), or another mapped column's name or NULL flag
//     (<name>__is_null), or whose own NULL flag is taken so: the name
//     with "__pg" appended, then "__pg2", "__pg3", ... until both the
//     name and its flag are free. Columns are mapped in attnum order
//     when a table is first agreed, and a column added later takes the
//     next free name, so the mapping never moves a column already
//     written (it is recorded in the agreement);
//   - an array column whose name holds a dot: ClickHouse takes arrays
//     named "n.a" and "n.b" for the columns of one Nested structure,
//     which share their sizes (an insert whose arrays differ in length
//     is refused, and a column added later reads the other's sizes), so
//     the dot is written %2E (and '%' as %25, as table names are);
//   - a name longer than ClickHouse's file names allow once escaped
//     (maxEscapedNameBytes, less what a NULL flag adds; for a table,
//     less what the load's side tables add: the table name
//     "schema.table" of two 63-byte non-ASCII names is 381 bytes
//     escaped): its longest prefix that fits, cut at a character, then
//     "__" and the first 8 hex digits of the SHA-256 of the whole name,
//     so two long names that share the prefix stay apart. A table name
//     shortens each of its schema and table parts to half the room
//     (the longer one only, when the shorter leaves it enough), so both
//     stay readable.
//
// Every other byte string, control characters and bytes that are not
// UTF-8 included, is a ClickHouse name as it is: QuoteIdent writes it
// with escapes ClickHouse reads back exactly.

// collisionSuffix is appended to a column name ClickHouse already uses.
const collisionSuffix = "__pg"

// fitName is name, or, when it is longer than limit bytes once escaped
// for file names, its longest prefix that fits with the hash tag, cut at
// a character.
func fitName(name string, limit int) string {
	if escapedLen(name) <= limit {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	tag := "__" + hex.EncodeToString(sum[:4])
	keep, n := 0, escapedLen(tag)
	for keep < len(name) {
		_, size := utf8.DecodeRuneInString(name[keep:])
		if n+escapedLen(name[keep:keep+size]) > limit {
			break
		}
		n += escapedLen(name[keep : keep+size])
		keep += size
	}
	return name[:keep] + tag
}

// nullFlagReserve is what a NULL flag adds to its column's name.
var nullFlagReserve = escapedLen(NullFlagSuffix)

// DefaultColumnName is the ClickHouse name column source gets before any
// collision is resolved: an array's dots escaped (not Nested), and
// shortened to fit with its NULL flag.
func DefaultColumnName(source string, array bool) string {
	name := source
	if array && strings.Contains(name, ".") {
		name = strings.NewReplacer("%", "%25", ".", "%2E").Replace(name)
	}
	return fitName(name, maxEscapedNameBytes-nullFlagReserve)
}

// freeColumnName is the first of base, base__pg, base__pg2, ... that is
// no synthetic column's name and that taken refuses neither as the name
// nor (flag) as its NULL flag, each fitted to ClickHouse's length limit.
func freeColumnName(base string, flag bool, taken func(string) bool) string {
	free := func(name string) bool {
		if syntheticNames()[name] || taken(name) {
			return false
		}
		if flag {
			f := name + NullFlagSuffix
			return !syntheticNames()[f] && !taken(f)
		}
		return true
	}
	if free(base) {
		return base
	}
	for i := 1; ; i++ {
		suffix := collisionSuffix
		if i > 1 {
			suffix += strconv.Itoa(i)
		}
		name := fitName(base, maxEscapedNameBytes-nullFlagReserve-escapedLen(suffix)) + suffix
		if free(name) {
			return name
		}
	}
}
