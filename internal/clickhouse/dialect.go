package clickhouse

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a ClickHouse server version: year-ish major, minor, patch
// (the fourth, build component of "23.8.2.7" is dropped: no capability
// depends on it).
type Version [3]int

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) }

// atLeast reports v >= major.minor.
func (v Version) atLeast(major, minor int) bool {
	return v[0] > major || v[0] == major && v[1] >= minor
}

// Dialect is what one server version can take. The renderers in this package
// consult only these flags, never the version, so a test can build any mix.
//
// Thresholds are the releases that introduced each feature; where memory of
// the changelog is uncertain the later release is used, since a missing
// capability only costs a fallback path while a wrongly assumed one fails DDL.
type Dialect struct {
	Version Version
	// IfNotExistsColumns: ALTER ... ADD COLUMN IF NOT EXISTS and
	// DROP COLUMN IF EXISTS (19.x; 18.16 rejects both with a syntax error).
	IfNotExistsColumns bool
	// RenameColumn: ALTER ... RENAME COLUMN (20.4).
	RenameColumn bool
	// DateTime64: DateTime64(6,'UTC') (20.1).
	DateTime64 bool
	// Bool: the Bool type (21.12); before it booleans are UInt8 0/1.
	Bool bool
	// Date32: the Date32 type (21.9); before it dates are Date (UInt16 days
	// since 1970).
	Date32 bool
	// WideDateRange: Date32 and DateTime64 cover 1900-01-01..2299-12-31
	// (22.8); earlier releases cover 1925-01-01..2283-11-11.
	WideDateRange bool
	// Decimal256: Decimal(p,s) up to p = 76 without an experimental setting
	// (22.1 here; 20.8 had it behind allow_experimental_bigint_types).
	Decimal256 bool
	// IsDeletedEngineArg: ReplacingMergeTree(ver, is_deleted) (23.2).
	IsDeletedEngineArg bool
	// LowCardinality: the LowCardinality(T) type without an experimental
	// setting (19.x made it general; 20.1 is taken as the safe release;
	// 18.16 has it only behind allow_experimental_low_cardinality_type).
	LowCardinality bool
	// NullableKey: Nullable columns in the sorting key under the table
	// setting allow_nullable_key (20.12). The renderer never relies on it:
	// key columns are always rendered non-Nullable.
	NullableKey bool
	// Replicated: the destination is a cluster (Topology): tables are
	// ReplicatedReplacingMergeTree under a ZooKeeper path of their own.
	// Not a property of the version: the connection sets it.
	Replicated bool
}

// DialectFor returns the capabilities of server version v.
func DialectFor(v Version) Dialect {
	return Dialect{
		Version:            v,
		IfNotExistsColumns: v.atLeast(19, 1),
		RenameColumn:       v.atLeast(20, 4),
		DateTime64:         v.atLeast(20, 1),
		Bool:               v.atLeast(21, 12),
		Date32:             v.atLeast(21, 9),
		WideDateRange:      v.atLeast(22, 8),
		Decimal256:         v.atLeast(22, 1),
		IsDeletedEngineArg: v.atLeast(23, 2),
		NullableKey:        v.atLeast(20, 12),
		LowCardinality:     v.atLeast(20, 1),
	}
}

// ParseVersion parses what SELECT version() returns ("18.16.1",
// "23.8.2.7", "24.3.1.2672"; a suffix like "-testing" is ignored).
func ParseVersion(s string) (Version, error) {
	var v Version
	trimmed := strings.TrimSpace(s)
	if i := strings.IndexAny(trimmed, "-+ "); i >= 0 {
		trimmed = trimmed[:i]
	}
	parts := strings.Split(trimmed, ".")
	if len(parts) < 2 || len(parts) > 4 {
		return v, fmt.Errorf("parsing ClickHouse version %q: want 2 to 4 dot-separated numbers", s)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || len(p) > 9 {
			return v, fmt.Errorf("parsing ClickHouse version %q: component %q is not a number", s, p)
		}
		if i < 3 {
			v[i] = n
		}
	}
	return v, nil
}

// ParseDialect is ParseVersion then DialectFor.
func ParseDialect(s string) (Dialect, error) {
	v, err := ParseVersion(s)
	if err != nil {
		return Dialect{}, err
	}
	return DialectFor(v), nil
}

// The two dialects the golden tests pin: Debian's 18.16.1 (the server the
// integration tests run against) and a modern LTS.
var (
	Legacy1816 = DialectFor(Version{18, 16, 1})
	Modern     = DialectFor(Version{23, 8, 2})
)
