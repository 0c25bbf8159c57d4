// Package copybin reads the initial load's COPY ... TO STDOUT (FORMAT binary)
// stream and turns every field into exactly the Go value the WAL decoder
// (decode.Value) gives for the same stored datum: in-tree types are selected
// natively and their send format is rebuilt into the on-disk datum that
// decode.Value accepts; every other type is selected as its output
// function's text, which is what the shadow's bridge renders.
package copybin

import (
	"strings"

	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/desclog"
)

// SessionSettings are the shadow bridge's pinned output settings
// (pgext/worker.c ws_pin_settings, without application_name). The loader's
// connection must SET all of them before COPY so the text of text-selected
// columns equals what the bridge renders: the lc_* ones change money, and
// search_path changes how reg* types print. Text fields arrive in the
// connection's client_encoding, so the loader must also keep that equal to
// the server encoding.
var SessionSettings = []struct{ Name, Value string }{
	{"TimeZone", "UTC"},
	{"DateStyle", "ISO, MDY"},
	{"IntervalStyle", "postgres"},
	{"extra_float_digits", "1"},
	{"bytea_output", "hex"},
	{"lc_numeric", "C"},
	{"lc_time", "C"},
	{"lc_monetary", "C"},
	{"search_path", "pg_catalog"},
}

// QuoteIdent quotes a PostgreSQL identifier: double quotes, embedded double
// quotes doubled.
func QuoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// SelectExprs returns one SELECT expression per live (not dropped) column of
// cols, in order. Columns of a type decode.Value decodes itself (a domain
// counts as its base type) are selected as-is and read from their binary
// send format. Every other column is selected as its type output function's
// text: format('%s', x) calls the output function, unlike a ::text cast,
// which for types with an explicit cast to text (bool, inet, bpchar,
// "char", user-defined casts) can print something else than the bridge.
// The CASE keeps NULL a NULL (format prints it as ”).
func SelectExprs(cols []*desclog.Column) []string {
	out := make([]string, 0, len(cols))
	for _, c := range cols {
		if c.Dropped {
			continue
		}
		q := QuoteIdent(c.Name)
		if native(c) {
			out = append(out, q)
		} else {
			out = append(out, "CASE WHEN pg_catalog.num_nulls("+q+") = 1 THEN NULL ELSE pg_catalog.format('%s', "+q+") END AS "+q)
		}
	}
	return out
}

// valueOid is the type whose send format a natively selected column has:
// a domain's base type, else the column's own (as decode does).
func valueOid(c *desclog.Column) uint32 {
	if c.TypeKind == 'd' && c.BaseTypeOid != 0 {
		return c.BaseTypeOid
	}
	return c.TypeOid
}

// native reports whether c is selected in binary: decode.Value decodes its
// type itself (the list mirrors decode's unexported inTree) and this package
// rebuilds the on-disk datum from the send format.
func native(c *desclog.Column) bool {
	switch valueOid(c) {
	case decode.OidBool, decode.OidBytea, decode.OidChar, decode.OidName, decode.OidInt8, decode.OidInt2,
		decode.OidInt4, decode.OidText, decode.OidOid, decode.OidJSON, decode.OidCidr, decode.OidFloat4,
		decode.OidFloat8, decode.OidMoney, decode.OidMacaddr, decode.OidInet, decode.OidBpchar,
		decode.OidVarchar, decode.OidDate, decode.OidTime, decode.OidTimestamp, decode.OidTimestamptz,
		decode.OidInterval, decode.OidTimetz, decode.OidNumeric, decode.OidUUID:
		return true
	}
	return false
}
