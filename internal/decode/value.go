package decode

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"time"
	"unsafe"

	"github.com/walshadow/walshadow/internal/desclog"
)

// pgEpochUnixMicros is 2000-01-01 00:00:00 UTC in Unix microseconds.
const pgEpochUnixMicros = int64(946684800) * 1000000

// Value returns the Go value of one non-NULL stored datum of col (raw as
// Deform returns it, varlenas expanded: a plain 4-byte or 1-byte header, not
// compressed, not external), following walshadow's row contract:
//
//	bool -> bool; int2, int4, int8, oid -> int64
//	float4, float8 -> float64 when finite, else "NaN", "Infinity", "-Infinity"
//	numeric -> json.Number (PostgreSQL's text) when finite, else the strings above
//	date -> time.Time (UTC midnight) for years 1..9999 AD, else PostgreSQL's text
//	timestamp, timestamptz -> time.Time (UTC, µs) for years 1..9999 AD, else text
//	bytea -> []byte (a copy)
//	other in-tree types -> string, PostgreSQL's text output (AppendText)
//
// A domain over an in-tree type (TypeKind 'd') is its base type. pending is
// true for every other type: the caller renders it through the shadow's
// bridge. Compressed and external varlenas are errors (expand them first).
func Value(col *desclog.Column, raw []byte) (v any, pending bool, err error) {
	return value(nil, col, raw)
}

// valueOid is the type whose on-disk format col's datums have: a domain's
// base type, else the column's own.
func valueOid(col *desclog.Column) uint32 {
	if col.TypeKind == 'd' && col.BaseTypeOid != 0 {
		return col.BaseTypeOid
	}
	return col.TypeOid
}

// inTree reports whether Value decodes type oid itself.
func inTree(oid uint32) bool {
	switch oid {
	case OidBool, OidBytea, OidChar, OidName, OidInt8, OidInt2, OidInt4, OidText, OidOid, OidJSON, OidCidr,
		OidFloat4, OidFloat8, OidMoney, OidMacaddr, OidInet, OidBpchar, OidVarchar, OidDate, OidTime,
		OidTimestamp, OidTimestamptz, OidInterval, OidTimetz, OidNumeric, OidUUID:
		return true
	}
	return false
}

func value(a *arena, col *desclog.Column, raw []byte) (any, bool, error) {
	oid := valueOid(col)
	switch oid {
	case OidBool:
		if err := fixed(raw, 1); err != nil {
			return nil, false, err
		}
		return raw[0] != 0, false, nil
	case OidInt2:
		if err := fixed(raw, 2); err != nil {
			return nil, false, err
		}
		return a.boxInt(int64(int16(binary.LittleEndian.Uint16(raw)))), false, nil
	case OidInt4:
		if err := fixed(raw, 4); err != nil {
			return nil, false, err
		}
		return a.boxInt(int64(int32(binary.LittleEndian.Uint32(raw)))), false, nil
	case OidInt8:
		if err := fixed(raw, 8); err != nil {
			return nil, false, err
		}
		return a.boxInt(int64(binary.LittleEndian.Uint64(raw))), false, nil
	case OidOid:
		if err := fixed(raw, 4); err != nil {
			return nil, false, err
		}
		return a.boxInt(int64(binary.LittleEndian.Uint32(raw))), false, nil
	case OidFloat4:
		if err := fixed(raw, 4); err != nil {
			return nil, false, err
		}
		return floatValue(a, float64(math.Float32frombits(binary.LittleEndian.Uint32(raw)))), false, nil
	case OidFloat8:
		if err := fixed(raw, 8); err != nil {
			return nil, false, err
		}
		return floatValue(a, math.Float64frombits(binary.LittleEndian.Uint64(raw))), false, nil
	case OidDate:
		if err := fixed(raw, 4); err != nil {
			return nil, false, err
		}
		return dateValue(a, int32(binary.LittleEndian.Uint32(raw))), false, nil
	case OidTimestamp, OidTimestamptz:
		if err := fixed(raw, 8); err != nil {
			return nil, false, err
		}
		return timestampValue(a, int64(binary.LittleEndian.Uint64(raw)), oid == OidTimestamptz), false, nil
	case OidBytea:
		v, err := ParseVarlena(raw)
		if err != nil {
			return nil, false, fmt.Errorf("bytea: %w", err)
		}
		if v.Kind != VarlenaShort && v.Kind != VarlenaPlain {
			return nil, false, fmt.Errorf("bytea: %w", errNotExpanded(v.Kind))
		}
		return a.copyBytes(v.Payload), false, nil
	case OidNumeric:
		s, err := renderString(a, oid, raw)
		if err != nil {
			return nil, false, err
		}
		switch s {
		case "NaN", "Infinity", "-Infinity":
			return s, false, nil // static strings: no allocation
		}
		return a.boxNumber(json.Number(s)), false, nil
	}
	if !inTree(oid) {
		return nil, true, nil
	}
	if col.Len == -1 {
		v, err := ParseVarlena(raw)
		if err != nil {
			return nil, false, fmt.Errorf("type %d: %w", oid, err)
		}
		if v.Kind != VarlenaShort && v.Kind != VarlenaPlain {
			return nil, false, fmt.Errorf("type %d: %w", oid, errNotExpanded(v.Kind))
		}
	}
	s, err := renderString(a, oid, raw)
	if err != nil {
		return nil, false, err
	}
	return a.boxString(s), false, nil
}

func errNotExpanded(k VarlenaKind) error {
	if k == VarlenaExternal {
		return ErrExternal
	}
	return fmt.Errorf("varlena kind %d is not expanded (compressed inline)", k)
}

// renderString is AppendText into the arena (or a fresh buffer).
func renderString(a *arena, oid uint32, raw []byte) (string, error) {
	var buf []byte
	if a != nil {
		buf = a.appendStart(len(raw) + 64) // text-like output is at most the payload; the rest is short
	}
	out, _, err := AppendText(buf, oid, raw)
	if err != nil {
		return "", err
	}
	if a == nil {
		return string(out), nil
	}
	b := a.endBytes(out)
	if len(b) == 0 {
		return "", nil
	}
	return unsafe.String(&b[0], len(b)), nil
}

func floatValue(a *arena, f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return a.boxFloat(f)
}

// dateValue: days since 2000-01-01.
func dateValue(a *arena, d int32) any {
	if d != math.MinInt32 && d != math.MaxInt32 {
		if y, m, day := j2date(int(d) + postgresEpochJDate); y >= 1 && y <= 9999 {
			return a.boxTime(time.Date(y, time.Month(m), day, 0, 0, 0, 0, time.UTC))
		}
	}
	return textOrStatic(a, appendDate(nil, d))
}

// timestampValue: microseconds since 2000-01-01 00:00:00 (UTC for timestamptz).
func timestampValue(a *arena, ts int64, withTZ bool) any {
	if ts != math.MinInt64 && ts != math.MaxInt64 {
		days := ts / usecsPerDay
		if ts%usecsPerDay < 0 {
			days--
		}
		if y, _, _ := j2date(int(days + postgresEpochJDate)); y >= 1 && y <= 9999 {
			return a.boxTime(time.UnixMicro(ts + pgEpochUnixMicros).UTC())
		}
	}
	return textOrStatic(a, appendTimestamp(nil, ts, withTZ))
}

// textOrStatic boxes rare out-of-range texts without arena bookkeeping.
func textOrStatic(a *arena, b []byte) any {
	switch string(b) {
	case "infinity":
		return "infinity"
	case "-infinity":
		return "-infinity"
	}
	return string(b)
}
