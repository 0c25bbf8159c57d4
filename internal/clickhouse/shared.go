package clickhouse

// CHColumn is one column of a ClickHouse table as system.columns lists it.
type CHColumn struct {
	Name string
	Type string // e.g. "Nullable(Int32)"
}

// CHTable is what ClickHouse holds for one target table: the existence
// facts the reconciliation decides on (ClickHouse is authoritative for
// whether a table exists, never for the column diff: that comes from the
// agreed baseline).
type CHTable struct {
	Exists  bool
	Columns []CHColumn // in position order; empty when !Exists
}

// Column returns the named column and whether the table has it.
func (t CHTable) Column(name string) (CHColumn, bool) {
	for _, c := range t.Columns {
		if c.Name == name {
			return c, true
		}
	}
	return CHColumn{}, false
}

// zeroMarker is the type of Zero.
type zeroMarker struct{}

// Zero stands for a value a row does not carry, in a delete row's non-key
// columns: NULL in a Nullable column, the type's zero value otherwise. It is
// a tombstone's filler, never a guess at data: the row is _is_deleted = 1.
var Zero any = zeroMarker{}
