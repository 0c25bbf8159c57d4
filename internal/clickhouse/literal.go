package clickhouse

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// QuoteString renders s as a ClickHouse string literal: single quotes, with
// backslash and quote escaped and control bytes as \xHH so the statement
// stays one printable line. Bytes >= 0x80 pass through: ClickHouse strings
// are byte strings.
func QuoteString(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' || c == '\'':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// DefaultLiteral renders a value given in PostgreSQL's text output (as
// attmissingval holds it) as a ClickHouse expression of type t that stores
// exactly the value the output would write for it. What it cannot express
// exactly is an error, never an approximation.
func DefaultLiteral(d Dialect, t ColumnType, text string) (string, error) {
	cast := func(canonical string) string { return "CAST(" + QuoteString(canonical) + " AS " + t.Type + ")" }
	switch t.Repr {
	case ReprString:
		return QuoteString(text), nil
	case ReprBytes:
		raw, err := parseByteaHex(text)
		if err != nil {
			return "", err
		}
		return QuoteString(string(raw)), nil
	case ReprBool:
		var v bool
		switch text {
		case "t", "true":
			v = true
		case "f", "false":
		default:
			return "", fmt.Errorf("boolean default %q is not t or f", text)
		}
		if t.Type == "Bool" {
			return strconv.FormatBool(v), nil
		}
		if v {
			return "CAST(1 AS UInt8)", nil
		}
		return "CAST(0 AS UInt8)", nil
	case ReprInt:
		bits := map[string]int{"Int16": 16, "Int32": 32, "Int64": 64}[t.Type]
		n, err := strconv.ParseInt(text, 10, bits)
		if err != nil || bits == 0 {
			return "", fmt.Errorf("integer default %q does not fit %s", text, t.Type)
		}
		return cast(strconv.FormatInt(n, 10)), nil
	case ReprUInt32:
		n, err := strconv.ParseUint(text, 10, 32)
		if err != nil {
			return "", fmt.Errorf("oid default %q is not an unsigned 32-bit integer", text)
		}
		return cast(strconv.FormatUint(n, 10)), nil
	case ReprFloat:
		return floatLiteral(t, text)
	case ReprDecimal:
		if err := checkDecimalText(text, t.Precision, t.Scale); err != nil {
			return "", err
		}
		return cast(text), nil
	case ReprUUID:
		if !isUUIDText(text) {
			return "", fmt.Errorf("uuid default %q is not in canonical form", text)
		}
		return cast(text), nil
	case ReprDate:
		day, err := time.Parse(time.DateOnly, text)
		if err != nil {
			return "", fmt.Errorf("date default %q cannot be stored (BC dates and infinity have no ClickHouse form): %w", text, err)
		}
		if err := checkDateRange(d, day, t.Type); err != nil {
			return "", err
		}
		return cast(text), nil
	case ReprUnixDays:
		days, err := pgDateDays(text)
		if err != nil {
			return "", fmt.Errorf("date default %q: %w", text, err)
		}
		return strconv.FormatInt(int64(days), 10), nil
	case ReprUnixMicros:
		// The same value the output writes: BC, years past 9999 and the
		// ±infinity sentinels included.
		us, err := pgTimestampMicros(text)
		if err != nil {
			return "", fmt.Errorf("timestamp default %q: %w", text, err)
		}
		return cast(strconv.FormatInt(us, 10)), nil
	case ReprDateTime64:
		ts, err := parseTimestampText(text)
		if err != nil {
			return "", err
		}
		if err := checkDateRange(d, ts, t.Type); err != nil {
			return "", err
		}
		return cast(ts.Format("2006-01-02 15:04:05.000000")), nil
	case ReprArray:
		if t.Elem == nil {
			return "", fmt.Errorf("array type %s without an element type", t.Type)
		}
		elems, err := parsePGArray(text)
		if err != nil {
			return "", err
		}
		lits := make([]string, len(elems))
		for i, e := range elems {
			if e == nil {
				lits[i] = "NULL"
				continue
			}
			if lits[i], err = DefaultLiteral(d, *t.Elem, *e); err != nil {
				return "", fmt.Errorf("element %d: %w", i+1, err)
			}
		}
		// The CAST types an empty array, and NULL elements, as the column.
		return "CAST([" + strings.Join(lits, ", ") + "] AS " + t.Type + ")", nil
	}
	return "", fmt.Errorf("no DEFAULT rendering for %s", t.Type)
}

func floatLiteral(t ColumnType, text string) (string, error) {
	var canonical string
	switch text {
	case "NaN":
		canonical = "nan"
	case "Infinity":
		canonical = "inf"
	case "-Infinity":
		canonical = "-inf"
	default:
		bits := 64
		if t.Type == "Float32" {
			bits = 32
		}
		f, err := strconv.ParseFloat(text, bits)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return "", fmt.Errorf("float default %q is not a %s", text, t.Type)
		}
		// The exact bits, little-endian: ClickHouse's float parsing is
		// not correctly rounded (18.16 reads 2.7626714238267354e-104 as
		// ...357e-104), so a decimal literal could change the value.
		var buf [8]byte
		if bits == 32 {
			binary.LittleEndian.PutUint32(buf[:4], math.Float32bits(float32(f)))
			return "reinterpretAsFloat32(unhex('" + strings.ToUpper(hex.EncodeToString(buf[:4])) + "'))", nil
		}
		binary.LittleEndian.PutUint64(buf[:], math.Float64bits(f))
		return "reinterpretAsFloat64(unhex('" + strings.ToUpper(hex.EncodeToString(buf[:])) + "'))", nil
	}
	return "CAST(" + QuoteString(canonical) + " AS " + t.Type + ")", nil
}

// checkDecimalText accepts numeric's text output that fits Decimal(p,s)
// exactly: optional '-', digits, optional '.' and at most s digits, at most
// p-s integer digits. NaN and ±Infinity have no Decimal form.
func checkDecimalText(text string, precision, scale int) error {
	body := strings.TrimPrefix(text, "-")
	intPart, frac, _ := strings.Cut(body, ".")
	if intPart == "" || !allDigits(intPart) || !allDigits(frac) {
		return fmt.Errorf("numeric default %q has no Decimal(%d, %d) form", text, precision, scale)
	}
	significant := strings.TrimLeft(intPart, "0")
	if len(frac) > scale || len(significant) > precision-scale {
		return fmt.Errorf("numeric default %q does not fit Decimal(%d, %d)", text, precision, scale)
	}
	return nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isUUIDText(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return false
			}
		} else if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// parseByteaHex decodes bytea's hex output (bytea_output = hex is pinned).
func parseByteaHex(text string) ([]byte, error) {
	h, ok := strings.CutPrefix(text, `\x`)
	if !ok {
		return nil, fmt.Errorf("bytea default %q is not in hex output form", text)
	}
	raw, err := hex.DecodeString(h)
	if err != nil {
		return nil, fmt.Errorf("bytea default %q: %w", text, err)
	}
	return raw, nil
}

// parseTimestampText parses timestamp and timestamptz output under the
// pinned DateStyle ISO and TimeZone UTC ("2024-01-02 03:04:05.123456" and
// "...+00"; offsets other than UTC are accepted and converted).
func parseTimestampText(text string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02 15:04:05.999999", "2006-01-02 15:04:05.999999-07", "2006-01-02 15:04:05.999999-07:00", "2006-01-02 15:04:05.999999-07:00:00"} {
		if ts, err := time.Parse(layout, text); err == nil {
			return ts.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("timestamp default %q cannot be stored (BC, infinity and years past 9999 have no ClickHouse form)", text)
}

func checkDateRange(d Dialect, ts time.Time, typ string) error {
	first, last := d.DateRange()
	day := ts.Format(time.DateOnly)
	if day < first || day > last {
		return fmt.Errorf("%s default %s is outside %s's range %s..%s", typ, ts.Format("2006-01-02 15:04:05.999999"), typ, first, last)
	}
	return nil
}
