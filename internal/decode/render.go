package decode

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// Type OIDs of the in-tree types Render knows (pg_type.dat).
const (
	OidBool        = 16
	OidBytea       = 17
	OidChar        = 18
	OidName        = 19
	OidInt8        = 20
	OidInt2        = 21
	OidInt4        = 23
	OidText        = 25
	OidOid         = 26
	OidJSON        = 114
	OidCidr        = 650
	OidFloat4      = 700
	OidFloat8      = 701
	OidMoney       = 790
	OidMacaddr     = 829
	OidInet        = 869
	OidBpchar      = 1042
	OidVarchar     = 1043
	OidDate        = 1082
	OidTime        = 1083
	OidTimestamp   = 1114
	OidTimestamptz = 1184
	OidInterval    = 1186
	OidTimetz      = 1266
	OidNumeric     = 1700
	OidUUID        = 2950
)

// Render is AppendText into a new buffer.
func Render(typeOid uint32, raw []byte) (text string, ok bool, err error) {
	b, ok, err := AppendText(nil, typeOid, raw)
	return string(b), ok, err
}

// AppendText appends the typoutput text of the stored datum raw (as Deform
// returns it) of type typeOid to dst, exactly as PostgreSQL 15 prints it
// under walshadow's pinned settings (TimeZone UTC, DateStyle ISO, MDY,
// IntervalStyle postgres, extra_float_digits 1, bytea_output hex,
// lc_monetary C). ok is false for types this package does not know: they go
// to the bridge. Varlenas compressed inline are inflated; TOAST pointers give
// ErrExternal.
func AppendText(dst []byte, typeOid uint32, raw []byte) (out []byte, ok bool, err error) {
	switch typeOid {
	case OidBool:
		if err := fixed(raw, 1); err != nil {
			return dst, true, err
		}
		if raw[0] != 0 {
			return append(dst, 't'), true, nil
		}
		return append(dst, 'f'), true, nil
	case OidChar:
		if err := fixed(raw, 1); err != nil {
			return dst, true, err
		}
		return appendChar(dst, raw[0]), true, nil
	case OidName:
		n := indexByte(raw, 0)
		if n < 0 {
			n = len(raw)
		}
		return append(dst, raw[:n]...), true, nil
	case OidInt2:
		if err := fixed(raw, 2); err != nil {
			return dst, true, err
		}
		return strconv.AppendInt(dst, int64(int16(binary.LittleEndian.Uint16(raw))), 10), true, nil
	case OidInt4:
		if err := fixed(raw, 4); err != nil {
			return dst, true, err
		}
		return strconv.AppendInt(dst, int64(int32(binary.LittleEndian.Uint32(raw))), 10), true, nil
	case OidInt8:
		if err := fixed(raw, 8); err != nil {
			return dst, true, err
		}
		return strconv.AppendInt(dst, int64(binary.LittleEndian.Uint64(raw)), 10), true, nil
	case OidOid:
		if err := fixed(raw, 4); err != nil {
			return dst, true, err
		}
		return strconv.AppendUint(dst, uint64(binary.LittleEndian.Uint32(raw)), 10), true, nil
	case OidFloat4:
		if err := fixed(raw, 4); err != nil {
			return dst, true, err
		}
		return appendFloat(dst, float64(math.Float32frombits(binary.LittleEndian.Uint32(raw))), 32), true, nil
	case OidFloat8:
		if err := fixed(raw, 8); err != nil {
			return dst, true, err
		}
		return appendFloat(dst, math.Float64frombits(binary.LittleEndian.Uint64(raw)), 64), true, nil
	case OidMoney:
		if err := fixed(raw, 8); err != nil {
			return dst, true, err
		}
		return appendMoney(dst, int64(binary.LittleEndian.Uint64(raw))), true, nil
	case OidUUID:
		if err := fixed(raw, 16); err != nil {
			return dst, true, err
		}
		return appendUUID(dst, raw), true, nil
	case OidMacaddr:
		if err := fixed(raw, 6); err != nil {
			return dst, true, err
		}
		for i, b := range raw {
			if i > 0 {
				dst = append(dst, ':')
			}
			dst = append(dst, hexDigits[b>>4], hexDigits[b&15])
		}
		return dst, true, nil
	case OidDate:
		if err := fixed(raw, 4); err != nil {
			return dst, true, err
		}
		return appendDate(dst, int32(binary.LittleEndian.Uint32(raw))), true, nil
	case OidTime:
		if err := fixed(raw, 8); err != nil {
			return dst, true, err
		}
		return appendTime(dst, int64(binary.LittleEndian.Uint64(raw))), true, nil
	case OidTimetz:
		if err := fixed(raw, 12); err != nil {
			return dst, true, err
		}
		dst = appendTime(dst, int64(binary.LittleEndian.Uint64(raw)))
		return appendTimezone(dst, int32(binary.LittleEndian.Uint32(raw[8:]))), true, nil
	case OidTimestamp, OidTimestamptz:
		if err := fixed(raw, 8); err != nil {
			return dst, true, err
		}
		return appendTimestamp(dst, int64(binary.LittleEndian.Uint64(raw)), typeOid == OidTimestamptz), true, nil
	case OidInterval:
		if err := fixed(raw, 16); err != nil {
			return dst, true, err
		}
		return appendInterval(dst, int64(binary.LittleEndian.Uint64(raw)), int32(binary.LittleEndian.Uint32(raw[8:])), int32(binary.LittleEndian.Uint32(raw[12:]))), true, nil
	case OidText, OidVarchar, OidBpchar, OidJSON, OidBytea, OidNumeric, OidInet, OidCidr:
		v, err := ParseVarlena(raw)
		if err != nil {
			return dst, true, fmt.Errorf("type %d: %w", typeOid, err)
		}
		payload, err := v.Inline(nil)
		if err != nil {
			return dst, true, fmt.Errorf("type %d: %w", typeOid, err)
		}
		out, err := appendVarlenaText(dst, typeOid, payload)
		if err != nil {
			return dst, true, fmt.Errorf("type %d: %w", typeOid, err)
		}
		return out, true, nil
	}
	return dst, false, nil
}

func appendVarlenaText(dst []byte, typeOid uint32, p []byte) ([]byte, error) {
	switch typeOid {
	case OidBytea:
		dst = append(dst, '\\', 'x')
		for _, b := range p {
			dst = append(dst, hexDigits[b>>4], hexDigits[b&15])
		}
		return dst, nil
	case OidNumeric:
		return appendNumeric(dst, p)
	case OidInet, OidCidr:
		return appendInet(dst, p, typeOid == OidCidr)
	}
	return append(dst, p...), nil
}

const hexDigits = "0123456789abcdef"

func fixed(raw []byte, n int) error {
	if len(raw) != n {
		return fmt.Errorf("fixed-length datum of %d bytes, want %d", len(raw), n)
	}
	return nil
}

// appendChar is charout: high-bit bytes print as \ooo, NUL as nothing.
func appendChar(dst []byte, c byte) []byte {
	switch {
	case c >= 0x80:
		return append(dst, '\\', '0'+c>>6, '0'+(c>>3)&7, '0'+c&7)
	case c == 0:
		return dst
	}
	return append(dst, c)
}

func appendUUID(dst []byte, u []byte) []byte {
	for i, b := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hexDigits[b>>4], hexDigits[b&15])
	}
	return dst
}

// appendFloat is float4out/float8out with extra_float_digits > 0: the
// shortest round-trip digits, fixed notation for decimal exponents in
// [-4, 15) (float8) or [-4, 6) (float4), else d.ddde±XX.
func appendFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	}
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, bits)
	// e is [-]d[.ddd]e±XX
	neg := e[0] == '-'
	if neg {
		e = e[1:]
	}
	ePos := indexByte(e, 'e')
	mant, expPart := e[:ePos], e[ePos+1:]
	exp, _ := strconv.Atoi(string(expPart))
	var digits [24]byte
	nd := 0
	for _, c := range mant {
		if c != '.' {
			digits[nd] = c
			nd++
		}
	}
	if neg {
		dst = append(dst, '-')
	}
	limit := 15
	if bits == 32 {
		limit = 6
	}
	if exp < -4 || exp >= limit {
		dst = append(dst, digits[0])
		if nd > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:nd]...)
		}
		dst = append(dst, 'e')
		if exp < 0 {
			dst = append(dst, '-')
			exp = -exp
		} else {
			dst = append(dst, '+')
		}
		if exp < 10 {
			dst = append(dst, '0')
		}
		return strconv.AppendInt(dst, int64(exp), 10)
	}
	if exp < 0 {
		dst = append(dst, '0', '.')
		for i := -1; i > exp; i-- {
			dst = append(dst, '0')
		}
		return append(dst, digits[:nd]...)
	}
	intDigits := exp + 1
	if nd <= intDigits {
		dst = append(dst, digits[:nd]...)
		for i := nd; i < intDigits; i++ {
			dst = append(dst, '0')
		}
		return dst
	}
	dst = append(dst, digits[:intDigits]...)
	dst = append(dst, '.')
	return append(dst, digits[intDigits:nd]...)
}

// appendMoney is cash_out under lc_monetary C: "$" before the amount,
// "," every three digits, two fraction digits, "-" in front when negative.
func appendMoney(dst []byte, v int64) []byte {
	u := uint64(v)
	if v < 0 {
		dst = append(dst, '-')
		u = uint64(-v) // two's complement: INT64_MIN stays right as uint64
	}
	dst = append(dst, '$')
	var buf [40]byte
	i := len(buf)
	pos := 2
	for {
		if pos == 0 {
			i--
			buf[i] = '.'
		} else if pos < 0 && pos%3 == 0 {
			i--
			buf[i] = ','
		}
		i--
		buf[i] = byte('0' + u%10)
		u /= 10
		pos--
		if u == 0 && pos < 0 {
			break
		}
	}
	return append(dst, buf[i:]...)
}
