package rowmodel

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/walshadow/walshadow/internal/pgfloat"
)

// valueKind is what a column's type means for rendering typed Go values
// whose text depends on the type (floats, dates, timestamps). Every other
// type arrives as a string already or renders the same whatever the type.
type valueKind uint8

const (
	kindOther valueKind = iota
	kindFloat4
	kindFloat8
	kindDate
	kindTimestamp
	kindTimestamptz
)

// Type oids of the kinds above (pg_type.h).
const (
	oidFloat4      = 700
	oidFloat8      = 701
	oidDate        = 1082
	oidTimestamp   = 1114
	oidTimestamptz = 1184
)

// kindOf classifies a column by its type oid when known, else by its type
// name: format_type output ("timestamp(3) with time zone", "double
// precision") or the short internal names ("timestamptz", "float8").
func kindOf(typeName string, typeOid uint32) valueKind {
	switch typeOid {
	case oidFloat4:
		return kindFloat4
	case oidFloat8:
		return kindFloat8
	case oidDate:
		return kindDate
	case oidTimestamp:
		return kindTimestamp
	case oidTimestamptz:
		return kindTimestamptz
	}
	name := strings.ToLower(strings.TrimSpace(typeName))
	name = strings.TrimPrefix(name, "pg_catalog.")
	switch name {
	case "real", "float4":
		return kindFloat4
	case "double precision", "float8", "float":
		return kindFloat8
	case "date":
		return kindDate
	case "timestamptz":
		return kindTimestamptz
	}
	if strings.HasPrefix(name, "timestamp") {
		// Drop a typmod: "timestamp(3) with time zone".
		if i := strings.IndexByte(name, '('); i >= 0 {
			if j := strings.IndexByte(name[i:], ')'); j >= 0 {
				name = name[:i] + name[i+j+1:]
			}
		}
		switch strings.TrimSpace(name) {
		case "timestamp", "timestamp without time zone":
			return kindTimestamp
		case "timestamp with time zone", "timestamptz":
			return kindTimestamptz
		}
	}
	return kindOther
}

// Canonical renders a typed value of the processor's row payload as
// PostgreSQL's text output for a column of the given kind (under the
// settings Compare uses): nil is NULL. It is an implementation independent
// from internal/decode so the model checks the decoder rather than echoing it.
func canonical(v any, kind valueKind) (*string, error) {
	var s string
	switch x := v.(type) {
	case nil:
		return nil, nil
	case bool:
		s = "f"
		if x {
			s = "t"
		}
	case string:
		s = x
	case json.Number:
		s = string(x)
	case int64:
		s = strconv.FormatInt(x, 10)
	case int:
		s = strconv.Itoa(x)
	case int32:
		s = strconv.FormatInt(int64(x), 10)
	case int16:
		s = strconv.FormatInt(int64(x), 10)
	case uint32:
		s = strconv.FormatUint(uint64(x), 10)
	case uint64:
		s = strconv.FormatUint(x, 10)
	case float64:
		if kind == kindFloat4 {
			s = pgfloat.Format(x, 32)
		} else {
			s = pgfloat.Format(x, 64)
		}
	case float32:
		s = pgfloat.Format(float64(x), 32)
	case []byte:
		s = `\x` + hex.EncodeToString(x)
	case time.Time:
		var err error
		if s, err = formatTime(x, kind); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unexpected value type %T (%v)", v, v)
	}
	return &s, nil
}

func formatTime(t time.Time, kind valueKind) (string, error) {
	t = t.UTC()
	switch kind {
	case kindDate:
		if t.Hour() != 0 || t.Minute() != 0 || t.Second() != 0 || t.Nanosecond() != 0 {
			return "", fmt.Errorf("date value %s is not a UTC midnight", t.Format(time.RFC3339Nano))
		}
		return t.Format("2006-01-02"), nil
	case kindTimestamp:
		return t.Format("2006-01-02 15:04:05.999999"), nil
	case kindTimestamptz:
		return t.Format("2006-01-02 15:04:05.999999") + "+00", nil
	}
	return "", fmt.Errorf("time.Time value %s for a column that is not date, timestamp or timestamptz", t.Format(time.RFC3339Nano))
}
