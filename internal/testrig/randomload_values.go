package testrig

import (
	"encoding/hex"
	"fmt"
	"math"
	"math/rand"
	"strconv"
	"strings"
)

// A valueGen returns a random value in PostgreSQL's text input form; null
// reports SQL NULL.
type valueGen func(r *rand.Rand) (text string, null bool)

func notNull(f func(r *rand.Rand) string) valueGen {
	return func(r *rand.Rand) (string, bool) { return f(r), false }
}

// nullable makes a generator return NULL one time in ten.
func nullable(g valueGen) valueGen {
	return func(r *rand.Rand) (string, bool) {
		if r.Intn(10) == 0 {
			return "", true
		}
		return g(r)
	}
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.Intn(len(xs))] }

// randText is printable text with the characters that trip quoting and COPY
// escaping: quotes, backslashes, tabs, newlines, and multi-byte UTF-8.
func randText(r *rand.Rand, maxRunes int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ,.;:-_/"
	specials := []string{"'", `"`, `\`, "\t", "\n", "\r", "é", "ß", "€", "日本", "🙂", "{", "}", "(", ")", "$$"}
	n := r.Intn(maxRunes + 1)
	var b strings.Builder
	for i := 0; i < n; i++ {
		if r.Intn(12) == 0 {
			b.WriteString(pick(r, specials...))
			continue
		}
		b.WriteByte(alphabet[r.Intn(len(alphabet))])
	}
	s := b.String()
	// Keep within maxRunes (specials may be two runes).
	if rs := []rune(s); len(rs) > maxRunes {
		s = string(rs[:maxRunes])
	}
	return s
}

// bigText is a value for a TOAST-able column: mostly short, sometimes
// 3-300 KB, half of those random bytes as hex (compresses poorly), half
// repetitive text (compresses well).
func bigText(r *rand.Rand) string {
	switch x := r.Intn(10); {
	case x < 7:
		return randText(r, 200)
	case x < 9:
		return largeValue(r, 3<<10+r.Intn(27<<10))
	default:
		return largeValue(r, 30<<10+r.Intn(270<<10))
	}
}

func largeValue(r *rand.Rand, size int) string {
	if r.Intn(2) == 0 {
		raw := make([]byte, size/2)
		r.Read(raw)
		return hex.EncodeToString(raw)
	}
	unit := randText(r, 40) + " walshadow "
	s := strings.Repeat(unit, size/len(unit)+1)[:size]
	// Do not cut a multi-byte character.
	return strings.ToValidUTF8(s, "")
}

func bigBytea(r *rand.Rand) string {
	n := r.Intn(64)
	if r.Intn(8) == 0 {
		n = 3<<10 + r.Intn(100<<10)
	}
	raw := make([]byte, n)
	r.Read(raw)
	return `\x` + hex.EncodeToString(raw)
}

func randFloat(r *rand.Rand, bits int) string {
	switch r.Intn(12) {
	case 0:
		return pick(r, "NaN", "Infinity", "-Infinity", "-0", "0")
	case 1:
		if bits == 64 {
			return pick(r, "0.1", "1e20", "1.5e-07", "123456789", "1e-05", "0.0001", "1e15", "100000000000000", "-2.5e-310", "1.7976931348623157e+308")
		}
		return pick(r, "0.1", "1e20", "1.5e-07", "123456789", "1e-05", "0.0001", "1e-45", "3.4028235e+38")
	}
	if bits == 32 {
		for {
			f := math.Float32frombits(r.Uint32())
			if !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) {
				if r.Intn(2) == 0 { // a human-sized value too
					f = float32((r.Float64() - 0.5) * math.Pow(10, float64(r.Intn(12)-4)))
				}
				return strconv.FormatFloat(float64(f), 'g', -1, 32)
			}
		}
	}
	for {
		f := math.Float64frombits(r.Uint64())
		if !math.IsNaN(f) && !math.IsInf(f, 0) {
			if r.Intn(2) == 0 {
				f = (r.Float64() - 0.5) * math.Pow(10, float64(r.Intn(30)-10))
			}
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
	}
}

func digits(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('0' + r.Intn(10))
	}
	if n > 1 && b[0] == '0' {
		b[0] = '1'
	}
	return string(b)
}

func randNumeric(r *rand.Rand) string {
	sign := pick(r, "", "", "-")
	switch r.Intn(10) {
	case 0:
		return pick(r, "NaN", "Infinity", "-Infinity", "0", "-0.000", "0.0000000000000000001")
	case 1:
		// About 1000 digits, split around the point.
		return sign + digits(r, 600) + "." + digits(r, 400)
	}
	s := sign + digits(r, 1+r.Intn(20))
	if r.Intn(2) == 0 {
		s += "." + digits(r, 1+r.Intn(12))
	}
	return s
}

func randNumeric10x2(r *rand.Rand) string {
	return fmt.Sprintf("%s%d.%03d", pick(r, "", "-"), r.Intn(100000000), r.Intn(1000))
}

func randUUID(r *rand.Rand) string {
	b := make([]byte, 16)
	r.Read(b)
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// uuidFor is a stable uuid for a row id, so rows can be found again.
func uuidFor(rid int64) string {
	return fmt.Sprintf("00000000-0000-4000-8000-%012x", rid)
}

func randDate(r *rand.Rand) string {
	switch r.Intn(12) {
	case 0:
		return pick(r, "infinity", "-infinity", "4713-01-01 BC", "0044-03-15 BC", "0001-01-01", "9999-12-31", "10000-01-01", "5874897-12-31")
	}
	return fmt.Sprintf("%04d-%02d-%02d", 1900+r.Intn(200), 1+r.Intn(12), 1+r.Intn(28))
}

func randClock(r *rand.Rand) string {
	s := fmt.Sprintf("%02d:%02d:%02d", r.Intn(24), r.Intn(60), r.Intn(60))
	if r.Intn(2) == 0 {
		s += fmt.Sprintf(".%06d", r.Intn(1000000))
	}
	return s
}

func randTime(r *rand.Rand) string {
	if r.Intn(20) == 0 {
		return pick(r, "24:00:00", "00:00:00", "23:59:59.999999")
	}
	return randClock(r)
}

func randOffset(r *rand.Rand) string {
	return pick(r, "+00", "+05:30", "-08", "+14", "-03:30", "+01")
}

func randTimestamp(r *rand.Rand, tz bool) string {
	if r.Intn(12) == 0 {
		return pick(r, "infinity", "-infinity", "10000-01-01 00:00:00", "294276-12-31 23:59:59", "0001-01-01 00:00:00 BC", "4713-11-24 00:00:00 BC", "9999-12-31 23:59:59.999999")
	}
	s := fmt.Sprintf("%04d-%02d-%02d %s", 1900+r.Intn(200), 1+r.Intn(12), 1+r.Intn(28), randClock(r))
	if tz {
		s += randOffset(r)
	}
	return s
}

func randInterval(r *rand.Rand) string {
	switch r.Intn(6) {
	case 0:
		return pick(r, "00:00:00", "-3 days", "00:00:00.000001", "178000000 years", "-1 mons +2 days -03:04:05")
	}
	return fmt.Sprintf("%d years %d mons %d days %s", r.Intn(20)-5, r.Intn(24)-12, r.Intn(60)-30, randClock(r))
}

func randInet(r *rand.Rand) string {
	if r.Intn(3) == 0 {
		return fmt.Sprintf("2001:db8:%x::%x/%d", r.Intn(65536), r.Intn(65536), pick(r, 128, 64, 48))
	}
	return fmt.Sprintf("%d.%d.%d.%d/%d", r.Intn(256), r.Intn(256), r.Intn(256), r.Intn(256), pick(r, 32, 24, 8, 16))
}

func randCidr(r *rand.Rand) string {
	if r.Intn(3) == 0 {
		return fmt.Sprintf("2001:db8:%x::/48", r.Intn(65536))
	}
	return fmt.Sprintf("%d.%d.0.0/16", r.Intn(256), r.Intn(256))
}

func randMac(r *rand.Rand) string {
	b := make([]byte, 6)
	r.Read(b)
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4], b[5])
}

func randMoney(r *rand.Rand) string {
	return fmt.Sprintf("%s%d.%02d", pick(r, "", "-"), r.Intn(10000000), r.Intn(100))
}

// randJSON is a JSON document with irregular spacing (json keeps it as typed,
// jsonb normalises it).
func randJSON(r *rand.Rand, depth int) string {
	switch k := r.Intn(7); {
	case depth > 2 || k == 0:
		return pick(r, "null", "true", "false", "0", "-1.5e3", "12345678901234567890")
	case k == 1:
		return strconv.Quote(randText(r, 12))
	case k <= 4:
		n := r.Intn(4)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf("%q:%s%s", fmt.Sprintf("k%d", r.Intn(10)), pick(r, "", " ", "  "), randJSON(r, depth+1))
		}
		return "{" + strings.Join(parts, pick(r, ",", ", ")) + "}"
	default:
		n := r.Intn(4)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = randJSON(r, depth+1)
		}
		return "[" + strings.Join(parts, pick(r, ",", " , ")) + "]"
	}
}

// quoteArrayElem quotes an array or composite element.
func quoteArrayElem(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

func randIntArray(r *rand.Rand) string {
	n := r.Intn(5)
	parts := make([]string, n)
	for i := range parts {
		if r.Intn(8) == 0 {
			parts[i] = "NULL"
		} else {
			parts[i] = strconv.Itoa(int(r.Int31()) - math.MaxInt32/2)
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func randTextArray(r *rand.Rand) string {
	n := r.Intn(4)
	parts := make([]string, n)
	for i := range parts {
		if r.Intn(8) == 0 {
			parts[i] = "NULL"
		} else {
			parts[i] = quoteArrayElem(randText(r, 10))
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func randInt4Range(r *rand.Rand) string {
	if r.Intn(8) == 0 {
		return pick(r, "empty", "(,)", "(,5]", "[10,)")
	}
	lo := r.Intn(1000) - 500
	return fmt.Sprintf("%s%d,%d%s", pick(r, "[", "("), lo, lo+1+r.Intn(100), pick(r, ")", "]"))
}

func randTstzRange(r *rand.Rand) string {
	if r.Intn(8) == 0 {
		return pick(r, "empty", `["2020-01-01 00:00:00+00",)`, `(,infinity)`)
	}
	y := 1990 + r.Intn(50)
	return fmt.Sprintf(`["%d-01-01 00:00:00+00","%d-06-30 12:00:00%s")`, y, y+r.Intn(3), randOffset(r))
}

func randTSVector(r *rand.Rand) string {
	words := []string{"fat", "cat", "sat", "mat", "ate", "rat", "a", "the", "walshadow"}
	n := 1 + r.Intn(5)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("%s:%d", pick(r, words...), 1+r.Intn(20))
	}
	return strings.Join(parts, " ")
}

func randPair(r *rand.Rand) string {
	if r.Intn(6) == 0 {
		return "(,)"
	}
	return fmt.Sprintf("(%d,%s)", r.Intn(1000), quoteArrayElem(randText(r, 12)))
}

// sqlLiteral renders a generated value as a typed SQL literal.
func sqlLiteral(text string, null bool, sqlType string) string {
	if null {
		return "NULL"
	}
	return "'" + strings.ReplaceAll(text, "'", "''") + "'::" + sqlType
}

// copyField renders a value for COPY's text format.
func copyField(text string, null bool) string {
	if null {
		return `\N`
	}
	return strings.NewReplacer(`\`, `\\`, "\t", `\t`, "\n", `\n`, "\r", `\r`).Replace(text)
}
