package decode

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/walshadow/walshadow/internal/desclog"
)

// MissingValue is Value for a row written before col was added with a
// default: col.Missing holds attmissingval's element as the type's text
// output (the catalog read renders it; nil means the missing value is NULL,
// reported as v == nil).
//
// Parsed into the typed value: bool, int2, int4, int8, oid, float4, float8,
// numeric (json.Number), bytea (hex form "\x..."), date, timestamp and
// timestamptz (ISO text, DateStyle ISO; any UTC offset). Passed through as
// the string they already are (their text output does not depend on
// session settings): text, varchar, bpchar, name, "char", json, uuid, inet,
// cidr, macaddr, time, timetz.
//
// pending is true, with v the text itself, for everything else: types
// outside the tree and interval and money (whose text depends on
// IntervalStyle and lc_monetary), and for a date, timestamp or bytea text in
// a form this parser does not read. A missing value has no on-disk datum
// for the bridge, so the caller keeps that text as the value: it is the
// type's own output function's result.
func MissingValue(col *desclog.Column) (v any, pending bool, err error) {
	return missingValue(nil, col)
}

func missingValue(a *arena, col *desclog.Column) (any, bool, error) {
	if col.Missing == nil {
		return nil, false, nil
	}
	s := *col.Missing
	switch oid := valueOid(col); oid {
	case OidBool:
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "t", "true", "y", "yes", "on", "1":
			return true, false, nil
		case "f", "false", "n", "no", "off", "0":
			return false, false, nil
		}
		return nil, false, fmt.Errorf("column %q: missing value %q is not a bool", col.Name, s)
	case OidInt2, OidInt4, OidInt8, OidOid:
		bits := map[uint32]int{OidInt2: 16, OidInt4: 32, OidInt8: 64}[oid]
		var n int64
		var err error
		if oid == OidOid {
			var u uint64
			u, err = strconv.ParseUint(strings.TrimSpace(s), 10, 32)
			n = int64(u)
		} else {
			n, err = strconv.ParseInt(strings.TrimSpace(s), 10, bits)
		}
		if err != nil {
			return nil, false, fmt.Errorf("column %q: missing value %q: %w", col.Name, s, err)
		}
		return a.boxInt(n), false, nil
	case OidFloat4, OidFloat8:
		bits := 64
		if oid == OidFloat4 {
			bits = 32
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(s), bits)
		if err != nil && !isRangeErr(err) {
			return nil, false, fmt.Errorf("column %q: missing value %q: %w", col.Name, s, err)
		}
		return floatValue(a, f), false, nil
	case OidNumeric:
		switch s {
		case "NaN", "Infinity", "-Infinity":
			return s, false, nil
		}
		if !isNumericText(s) {
			return nil, false, fmt.Errorf("column %q: missing value %q is not a numeric", col.Name, s)
		}
		return a.boxNumber(json.Number(s)), false, nil
	case OidBytea:
		if b, ok := parseByteaHex(s); ok {
			return a.copyBytes(b), false, nil
		}
		return s, true, nil
	case OidDate:
		if d, ok := parseDate(s); ok {
			return dateValue(a, d), false, nil
		}
		return s, true, nil
	case OidTimestamp, OidTimestamptz:
		if ts, ok := parseTimestamp(s, oid == OidTimestamptz); ok {
			return timestampValue(a, ts, oid == OidTimestamptz), false, nil
		}
		return s, true, nil
	case OidText, OidVarchar, OidBpchar, OidName, OidChar, OidJSON, OidUUID, OidInet, OidCidr, OidMacaddr, OidTime, OidTimetz:
		return a.boxString(s), false, nil
	}
	return s, true, nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// isNumericText checks numeric_out's shape: -?digits(.digits)?
func isNumericText(s string) bool {
	if strings.HasPrefix(s, "-") {
		s = s[1:]
	}
	intPart, frac, hasDot := strings.Cut(s, ".")
	return allDigits(intPart) && intPart != "" && (!hasDot || (frac != "" && allDigits(frac)))
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func parseByteaHex(s string) ([]byte, bool) {
	if !strings.HasPrefix(s, `\x`) || len(s)%2 != 0 {
		return nil, false
	}
	out := make([]byte, 0, (len(s)-2)/2)
	for i := 2; i < len(s); i += 2 {
		hi, ok1 := hexVal(s[i])
		lo, ok2 := hexVal(s[i+1])
		if !ok1 || !ok2 {
			return nil, false
		}
		out = append(out, hi<<4|lo)
	}
	return out, true
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// date2j is PostgreSQL's date2j: proleptic Gregorian date to Julian day
// (year <= 0 is 1 BC, 2 BC, ...).
func date2j(y, m, d int) int {
	if m > 2 {
		m++
		y += 4800
	} else {
		m += 13
		y += 4799
	}
	century := y / 100
	j := y*365 - 32167
	j += y/4 - century + century/4
	j += 7834*m/256 + d
	return j
}

// cutBC strips a trailing " BC" and reports whether it was there.
func cutBC(s string) (string, bool) {
	if t, ok := strings.CutSuffix(s, " BC"); ok {
		return t, true
	}
	return s, false
}

// parseYMD reads "Y...Y-MM-DD" (ISO, year of at least 4 digits) into an
// astronomical year (bc: 1 BC is year 0).
func parseYMD(s string, bc bool) (y, m, d int, ok bool) {
	ys, rest, ok1 := strings.Cut(s, "-")
	ms, ds, ok2 := strings.Cut(rest, "-")
	if !ok1 || !ok2 || len(ys) < 4 || len(ms) != 2 || len(ds) != 2 || !allDigits(ys) || !allDigits(ms) || !allDigits(ds) || len(ys) > 7 {
		return 0, 0, 0, false
	}
	y, _ = strconv.Atoi(ys)
	m, _ = strconv.Atoi(ms)
	d, _ = strconv.Atoi(ds)
	if m < 1 || m > 12 || d < 1 || d > 31 || y == 0 {
		return 0, 0, 0, false
	}
	if bc {
		y = 1 - y
	}
	return y, m, d, true
}

// parseDate reads date_out's ISO text into days since 2000-01-01.
func parseDate(s string) (int32, bool) {
	switch s {
	case "infinity":
		return math.MaxInt32, true
	case "-infinity":
		return math.MinInt32, true
	}
	body, bc := cutBC(s)
	y, m, d, ok := parseYMD(body, bc)
	if !ok {
		return 0, false
	}
	days := int64(date2j(y, m, d)) - postgresEpochJDate
	if days <= math.MinInt32 || days >= math.MaxInt32 {
		return 0, false
	}
	return int32(days), true
}

// parseTimestamp reads timestamp_out / timestamptz_out ISO text ("Y-M-D
// HH:MM:SS[.ffffff][+HH[:MM[:SS]]][ BC]") into microseconds since
// 2000-01-01 (UTC for timestamptz: the offset is applied).
func parseTimestamp(s string, withTZ bool) (int64, bool) {
	switch s {
	case "infinity":
		return math.MaxInt64, true
	case "-infinity":
		return math.MinInt64, true
	}
	body, bc := cutBC(s)
	datePart, timePart, ok := strings.Cut(body, " ")
	if !ok {
		return 0, false
	}
	y, m, d, ok := parseYMD(datePart, bc)
	if !ok {
		return 0, false
	}
	var offset int64 // seconds east of UTC
	if withTZ {
		i := strings.IndexAny(timePart, "+-")
		if i < 0 {
			return 0, false
		}
		sign := int64(1)
		if timePart[i] == '-' {
			sign = -1
		}
		parts := strings.Split(timePart[i+1:], ":")
		if len(parts) > 3 {
			return 0, false
		}
		mult := int64(3600)
		for _, p := range parts {
			if len(p) != 2 || !allDigits(p) {
				return 0, false
			}
			v, _ := strconv.ParseInt(p, 10, 64)
			offset += v * mult
			mult /= 60
		}
		offset *= sign
		timePart = timePart[:i]
	}
	hms, frac, hasFrac := strings.Cut(timePart, ".")
	hs := strings.Split(hms, ":")
	if len(hs) != 3 {
		return 0, false
	}
	var clock [3]int64
	for i, p := range hs {
		if len(p) != 2 || !allDigits(p) {
			return 0, false
		}
		clock[i], _ = strconv.ParseInt(p, 10, 64)
	}
	var usec int64
	if hasFrac {
		if frac == "" || len(frac) > 6 || !allDigits(frac) {
			return 0, false
		}
		usec, _ = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	days := int64(date2j(y, m, d)) - postgresEpochJDate
	// PostgreSQL's range ends near 294276 AD: stay far from int64 overflow.
	if days > 106000000 || days < -3000000 {
		return 0, false
	}
	ts := days*usecsPerDay + clock[0]*usecsPerHour + clock[1]*usecsPerMinute + clock[2]*usecsPerSec + usec
	return ts - offset*usecsPerSec, true
}
