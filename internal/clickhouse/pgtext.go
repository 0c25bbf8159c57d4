package clickhouse

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Parsers of PostgreSQL's text output (DateStyle ISO, TimeZone UTC) for the
// values the decoder hands over as strings: arrays, and dates and
// timestamps outside years 1..9999 (BC, year > 9999, ±infinity).

// parsePGArray parses a one-dimensional array's text output ('{1,2,NULL}',
// '{"a b","c\"d",NULL,"NULL"}', '{}') into its elements, nil for NULL.
// Whitespace around unquoted elements is dropped as array_in does; quoted
// elements and backslash escapes keep every byte. Nested arrays and an
// explicit lower bound ("[0:1]={...}") are errors: ClickHouse arrays have
// neither.
func parsePGArray(text string) ([]*string, error) {
	s := strings.TrimLeft(text, " \t\n\r\v\f")
	if strings.HasPrefix(s, "[") {
		return nil, errors.New("array has explicit bounds (a lower bound other than 1 or several dimensions)")
	}
	if !strings.HasPrefix(s, "{") {
		return nil, errors.New("array text does not start with '{'")
	}
	i := 1
	skipSpace := func() {
		for i < len(s) && isArraySpace(s[i]) {
			i++
		}
	}
	elems := []*string{}
	skipSpace()
	if i < len(s) && s[i] == '}' {
		i++
		return elems, checkArrayEnd(s, i)
	}
	for {
		skipSpace()
		if i >= len(s) {
			return nil, errors.New("array text ends inside the array")
		}
		var elem *string
		switch s[i] {
		case '{':
			return nil, errors.New("multi-dimensional arrays have no ClickHouse form")
		case '"':
			var b strings.Builder
			i++
			closed := false
			for i < len(s) && !closed {
				switch c := s[i]; c {
				case '\\':
					if i+1 >= len(s) {
						return nil, errors.New("array text ends inside an escape")
					}
					b.WriteByte(s[i+1])
					i += 2
				case '"':
					closed = true
					i++
				default:
					b.WriteByte(c)
					i++
				}
			}
			if !closed {
				return nil, errors.New("array text ends inside a quoted element")
			}
			v := b.String()
			elem = &v
			skipSpace()
		default:
			var b strings.Builder
			// keep is the length of b up to its last byte that is not
			// unescaped trailing whitespace.
			keep, escaped := 0, false
			for i < len(s) && s[i] != ',' && s[i] != '}' {
				switch c := s[i]; {
				case c == '\\':
					if i+1 >= len(s) {
						return nil, errors.New("array text ends inside an escape")
					}
					b.WriteByte(s[i+1])
					keep, escaped = b.Len(), true
					i += 2
				case c == '"' || c == '{':
					return nil, fmt.Errorf("unexpected %q inside an unquoted array element", c)
				default:
					b.WriteByte(c)
					if !isArraySpace(c) {
						keep = b.Len()
					}
					i++
				}
			}
			v := b.String()[:keep]
			if v == "" && !escaped {
				return nil, errors.New("array has an empty unquoted element")
			}
			if !escaped && strings.EqualFold(v, "NULL") {
				elem = nil
			} else {
				elem = &v
			}
		}
		elems = append(elems, elem)
		if i >= len(s) {
			return nil, errors.New("array text ends inside the array")
		}
		switch s[i] {
		case ',':
			i++
		case '}':
			i++
			return elems, checkArrayEnd(s, i)
		default:
			return nil, fmt.Errorf("unexpected %q after an array element", s[i])
		}
	}
}

func checkArrayEnd(s string, i int) error {
	if strings.TrimLeft(s[i:], " \t\n\r\v\f") != "" {
		return errors.New("junk after the array's closing '}'")
	}
	return nil
}

func isArraySpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// Sentinels of ReprUnixDays for PostgreSQL's date infinities: PostgreSQL
// itself stores them as these int32 values (DATEVAL_NOBEGIN, DATEVAL_NOEND),
// so no finite date collides with them.
const (
	UnixDaysMinusInfinity int32 = math.MinInt32
	UnixDaysInfinity      int32 = math.MaxInt32
)

// Sentinels of ReprUnixMicros for timestamp ±infinity (PostgreSQL's own
// DT_NOBEGIN and DT_NOEND are the int64 extremes too).
const (
	UnixMicrosMinusInfinity int64 = math.MinInt64
	UnixMicrosInfinity      int64 = math.MaxInt64
)

const microsecondsPerDay int64 = 86_400_000_000

// pgDateDays parses date output ("2020-01-02", "0044-03-15 BC",
// "10000-01-01", "infinity", "-infinity") into days since 1970-01-01, the
// infinities as the UnixDays sentinels.
func pgDateDays(text string) (int32, error) {
	switch text {
	case "infinity":
		return UnixDaysInfinity, nil
	case "-infinity":
		return UnixDaysMinusInfinity, nil
	}
	body, bc := strings.CutSuffix(text, " BC")
	days, err := civilDays(body, bc)
	if err != nil {
		return 0, err
	}
	// PostgreSQL's dates span 4714-11-24 BC .. 5874897-12-31, well inside
	// int32 days and clear of the sentinels.
	if days <= int64(UnixDaysMinusInfinity) || days >= int64(UnixDaysInfinity) {
		return 0, fmt.Errorf("date %q is outside the int32 day range", text)
	}
	return int32(days), nil
}

// civilDays parses "Y-MM-DD" (Y of at least four digits) as days since
// 1970-01-01 in the proleptic Gregorian calendar; bc makes Y a year before
// Christ (1 BC is year 0).
func civilDays(s string, bc bool) (int64, error) {
	ys, rest, ok := strings.Cut(s, "-")
	if !ok || len(ys) < 4 || len(ys) > 7 || !allDigits(ys) || len(rest) != 5 || rest[2] != '-' ||
		!allDigits(rest[:2]) || !allDigits(rest[3:]) {
		return 0, fmt.Errorf("%q is not a date in ISO form", s)
	}
	year, _ := strconv.Atoi(ys)
	month, _ := strconv.Atoi(rest[:2])
	day, _ := strconv.Atoi(rest[3:])
	if year == 0 {
		return 0, fmt.Errorf("%q: there is no year 0", s)
	}
	if bc {
		year = 1 - year
	}
	t := time.Date(year, time.Month(month), day, 0, 0, 0, 0, time.UTC)
	if y, m, d := t.Date(); y != year || int(m) != month || d != day {
		return 0, fmt.Errorf("%q is not a calendar date", s)
	}
	return floorDivide(t.Unix(), 86400), nil
}

func floorDivide(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// pgTimestampMicros parses timestamp and timestamptz output ("2024-01-02
// 03:04:05.123456", "...+00", "...+05:30", "0044-03-15 12:00:00+00 BC",
// "10000-01-01 00:00:00", "infinity", "-infinity") into microseconds since
// 1970-01-01 00:00:00 UTC; the infinities are the UnixMicros sentinels and
// instants past the int64 range are errors.
func pgTimestampMicros(text string) (int64, error) {
	switch text {
	case "infinity":
		return UnixMicrosInfinity, nil
	case "-infinity":
		return UnixMicrosMinusInfinity, nil
	}
	body, bc := strings.CutSuffix(text, " BC")
	datePart, timePart, ok := strings.Cut(body, " ")
	if !ok {
		return 0, fmt.Errorf("timestamp %q has no time of day", text)
	}
	days, err := civilDays(datePart, bc)
	if err != nil {
		return 0, fmt.Errorf("timestamp %q: %w", text, err)
	}
	clock, offsetSeconds, err := splitOffset(timePart)
	if err != nil {
		return 0, fmt.Errorf("timestamp %q: %w", text, err)
	}
	timeOfDay, err := parseClock(clock)
	if err != nil {
		return 0, fmt.Errorf("timestamp %q: %w", text, err)
	}
	if days > math.MaxInt64/microsecondsPerDay || days < math.MinInt64/microsecondsPerDay {
		return 0, fmt.Errorf("timestamp %q is outside the int64 microsecond range", text)
	}
	us, ok := addInt64(days*microsecondsPerDay, timeOfDay)
	if ok {
		us, ok = addInt64(us, -offsetSeconds*1_000_000)
	}
	if !ok || us == UnixMicrosInfinity || us == UnixMicrosMinusInfinity {
		return 0, fmt.Errorf("timestamp %q is outside the int64 microsecond range", text)
	}
	return us, nil
}

// splitOffset splits "03:04:05.5+05:30" into the clock and the UTC offset
// in seconds (0 without an offset).
func splitOffset(s string) (string, int64, error) {
	i := strings.LastIndexAny(s, "+-")
	if i < 0 {
		return s, 0, nil
	}
	sign := int64(1)
	if s[i] == '-' {
		sign = -1
	}
	var seconds int64
	for n, part := range strings.Split(s[i+1:], ":") {
		if n > 2 || len(part) != 2 || !allDigits(part) {
			return "", 0, fmt.Errorf("offset %q is not ±HH[:MM[:SS]]", s[i:])
		}
		v, _ := strconv.Atoi(part)
		seconds += int64(v) * [3]int64{3600, 60, 1}[n]
	}
	return s[:i], sign * seconds, nil
}

// parseClock parses "HH:MM:SS[.ffffff]" into microseconds after midnight
// (24:00:00 included, as PostgreSQL accepts it).
func parseClock(s string) (int64, error) {
	whole, frac, hasFrac := strings.Cut(s, ".")
	if len(whole) != 8 || whole[2] != ':' || whole[5] != ':' || !allDigits(whole[:2]) || !allDigits(whole[3:5]) ||
		!allDigits(whole[6:]) || hasFrac && (frac == "" || len(frac) > 6 || !allDigits(frac)) {
		return 0, fmt.Errorf("time of day %q is not HH:MM:SS[.ffffff]", s)
	}
	h, _ := strconv.Atoi(whole[:2])
	m, _ := strconv.Atoi(whole[3:5])
	sec, _ := strconv.Atoi(whole[6:])
	us := 0
	if hasFrac {
		us, _ = strconv.Atoi(frac + strings.Repeat("0", 6-len(frac)))
	}
	if m > 59 || sec > 59 || h > 24 || h == 24 && (m != 0 || sec != 0 || us != 0) {
		return 0, fmt.Errorf("time of day %q is out of range", s)
	}
	return int64(h)*3_600_000_000 + int64(m)*60_000_000 + int64(sec)*1_000_000 + int64(us), nil
}

func addInt64(a, b int64) (int64, bool) {
	sum := a + b
	if (b > 0 && sum < a) || (b < 0 && sum > a) {
		return 0, false
	}
	return sum, true
}
