package load

import "slices"

// The reasons a followed table is loaded again: the closed set of
// walshadow_table_reloads_total{reason} and of the ledger's reload counts
// (`walshadow status`, RELOADS).
const (
	// A column type change ClickHouse cannot follow exactly
	// (clickhouse.Plan.Reload: narrowing, timestamp ↔ timestamptz, a
	// column of the partition key, ...).
	ReloadTypeChange = "type_change"
	// A composite type's attributes changed (ALTER TYPE ... ATTRIBUTE):
	// every stored value of it reads differently.
	ReloadCompositeType = "composite_type"
	// The replica identity key was dropped: rows are keyed by their
	// physical identity from then on.
	ReloadKeyDropped = "key_dropped"
	// VACUUM FULL, CLUSTER or a rewriting ALTER TABLE moved every row of
	// a table keyed by physical identity.
	ReloadRewrite = "rewrite"
	// A value its ClickHouse column cannot hold (walshadow's conversion
	// refused it; the reload may map the column to String).
	ReloadValueRefused = "value_refused"
	// ClickHouse refused the table's rows or DDL.
	ReloadClickHouseRefused = "clickhouse_refused"
	// The processor could not decode a change of the table.
	ReloadDecodeFailed = "decode_failed"
	// An unchanged TOAST value of an update was found nowhere.
	ReloadToastMissing = "toast_missing"
	// A TRUNCATE, schema change or replica identity change of the table
	// while it loaded: its load started over.
	ReloadChangedDuringLoad = "changed_during_load"
	// The table came back into the configured scope (or entered it
	// while already filled under another name).
	ReloadScope = "scope"
	// The table was made LOGGED: its rows from while it was UNLOGGED are
	// not in the WAL.
	ReloadMadeLogged = "made_logged"
	// The operator asked for it (walshadow reload).
	ReloadRequested = "requested"
	// Any other failure of the table alone.
	ReloadOther = "other"
)

// ReloadReasons is every reason, in the order status lists them.
var ReloadReasons = []string{ReloadTypeChange, ReloadCompositeType, ReloadKeyDropped, ReloadRewrite, ReloadValueRefused,
	ReloadClickHouseRefused, ReloadDecodeFailed, ReloadToastMissing, ReloadChangedDuringLoad, ReloadScope, ReloadMadeLogged,
	ReloadRequested, ReloadOther}

// knownReason is reason, or ReloadOther when it is not in the set.
func knownReason(reason string) string {
	if slices.Contains(ReloadReasons, reason) {
		return reason
	}
	return ReloadOther
}
