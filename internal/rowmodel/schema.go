package rowmodel

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Column is one live column of a relation as a schema event describes it.
type Column struct {
	// Num is the attnum, 0 when the event does not carry it (matching then
	// falls back to names).
	Num     int16
	Name    string
	Type    string // format_type text, e.g. "numeric(10,2)"
	TypeOid uint32 // 0 when the event does not carry it
	TypMod  int32
	NotNull bool
	Key     bool
	// HasMissing and Missing: the value rows written before the column was
	// added read for it (attmissingval's text; Missing nil is NULL).
	HasMissing bool
	Missing    *string

	kind valueKind
}

// Rename is a column renamed by a "changed" event.
type Rename struct {
	Num              int16
	OldName, NewName string
}

// SchemaDiff is the difference a "changed" event carries.
type SchemaDiff struct {
	Added   []Column
	Dropped []Column
	Renamed []Rename
	Present bool // the event had a diff at all
}

// SchemaPayload is a schema event's payload as the model reads it.
//
// Assumed shape (the processor's contract names name/type/typmod/not_null/key
// per column; the rest is accepted when present, so the model works with the
// minimal form too):
//
//	{"columns": [{"num": 1, "name": "id", "type": "integer", "type_oid": 23,
//	              "typmod": -1, "not_null": true, "key": true,
//	              "has_missing": false, "missing": null}, ...],
//	 "diff": {"added": [column...], "dropped": [column...],
//	          "renamed": [{"num": 2, "old_name": "a", "new_name": "b"}, ...]}}
//
// "attnum" is accepted for "num", "missing_value" for "missing", and
// "from"/"to" for "old_name"/"new_name"; numbers may be any JSON number form.
type SchemaPayload struct {
	Columns []Column
	Diff    SchemaDiff
}

// ParseSchemaPayload reads a schema event payload (structured, as Benthos'
// AsStructured returns it or encoding/json decodes it).
func ParseSchemaPayload(payload map[string]any) (SchemaPayload, error) {
	var sp SchemaPayload
	if raw, ok := payload["columns"]; ok && raw != nil {
		cols, err := parseColumns(raw)
		if err != nil {
			return sp, fmt.Errorf("columns: %w", err)
		}
		sp.Columns = cols
	}
	rawDiff, ok := payload["diff"]
	if !ok || rawDiff == nil {
		return sp, nil
	}
	diff, ok := rawDiff.(map[string]any)
	if !ok {
		return sp, fmt.Errorf("diff: want an object, got %T", rawDiff)
	}
	sp.Diff.Present = true
	var err error
	if raw, ok := diff["added"]; ok && raw != nil {
		if sp.Diff.Added, err = parseColumns(raw); err != nil {
			return sp, fmt.Errorf("diff.added: %w", err)
		}
	}
	if raw, ok := diff["dropped"]; ok && raw != nil {
		if sp.Diff.Dropped, err = parseColumns(raw); err != nil {
			return sp, fmt.Errorf("diff.dropped: %w", err)
		}
	}
	if raw, ok := diff["renamed"]; ok && raw != nil {
		list, ok := raw.([]any)
		if !ok {
			return sp, fmt.Errorf("diff.renamed: want a list, got %T", raw)
		}
		for i, item := range list {
			obj, ok := item.(map[string]any)
			if !ok {
				return sp, fmt.Errorf("diff.renamed[%d]: want an object, got %T", i, item)
			}
			var r Rename
			num, err := intField(obj, "num", "attnum")
			if err != nil {
				return sp, fmt.Errorf("diff.renamed[%d]: %w", i, err)
			}
			r.Num = int16(num)
			r.OldName, _ = stringField(obj, "old_name", "from", "old")
			r.NewName, _ = stringField(obj, "new_name", "to", "new")
			if r.OldName == "" || r.NewName == "" {
				return sp, fmt.Errorf("diff.renamed[%d]: old or new name missing", i)
			}
			sp.Diff.Renamed = append(sp.Diff.Renamed, r)
		}
	}
	return sp, nil
}

// parseColumns reads a list of column objects; a bare string is a column
// known by name only (a dropped column may be listed that way).
func parseColumns(raw any) ([]Column, error) {
	list, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("want a list, got %T", raw)
	}
	cols := make([]Column, 0, len(list))
	for i, item := range list {
		if name, ok := item.(string); ok {
			cols = append(cols, Column{Name: name})
			continue
		}
		obj, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("[%d]: want an object, got %T", i, item)
		}
		var c Column
		var err error
		if c.Name, err = stringField(obj, "name"); err != nil || c.Name == "" {
			return nil, fmt.Errorf("[%d]: column without a name", i)
		}
		num, err := intField(obj, "num", "attnum")
		if err != nil {
			return nil, fmt.Errorf("[%d] %q: %w", i, c.Name, err)
		}
		if num < 0 || num > math.MaxInt16 {
			return nil, fmt.Errorf("[%d] %q: attnum %d out of range", i, c.Name, num)
		}
		c.Num = int16(num)
		c.Type, _ = stringField(obj, "type", "type_name")
		oid, err := intField(obj, "type_oid")
		if err != nil || oid < 0 || oid > math.MaxUint32 {
			return nil, fmt.Errorf("[%d] %q: bad type_oid", i, c.Name)
		}
		c.TypeOid = uint32(oid)
		typmod, err := intField(obj, "typmod")
		if err != nil {
			return nil, fmt.Errorf("[%d] %q: %w", i, c.Name, err)
		}
		if _, ok := obj["typmod"]; !ok {
			typmod = -1
		}
		c.TypMod = int32(typmod)
		c.NotNull, _ = obj["not_null"].(bool)
		c.Key, _ = obj["key"].(bool)
		c.HasMissing, _ = obj["has_missing"].(bool)
		for _, name := range []string{"missing", "missing_value"} {
			v, ok := obj[name]
			if !ok {
				continue
			}
			if v != nil {
				s, err := scalarText(v)
				if err != nil {
					return nil, fmt.Errorf("[%d] %q: %s: %w", i, c.Name, name, err)
				}
				c.Missing = &s
				c.HasMissing = true
			}
			break
		}
		c.kind = kindOf(c.Type, c.TypeOid)
		cols = append(cols, c)
	}
	return cols, nil
}

func stringField(obj map[string]any, names ...string) (string, error) {
	for _, n := range names {
		if v, ok := obj[n]; ok && v != nil {
			s, ok := v.(string)
			if !ok {
				return "", fmt.Errorf("%s: want a string, got %T", n, v)
			}
			return s, nil
		}
	}
	return "", nil
}

// intField reads the first present of names as an integer (0 when absent).
func intField(obj map[string]any, names ...string) (int64, error) {
	for _, n := range names {
		v, ok := obj[n]
		if !ok || v == nil {
			continue
		}
		switch x := v.(type) {
		case int64:
			return x, nil
		case int:
			return int64(x), nil
		case int32:
			return int64(x), nil
		case uint32:
			return int64(x), nil
		case float64:
			if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
				return 0, fmt.Errorf("%s: %v is not an integer", n, x)
			}
			return int64(x), nil
		case json.Number:
			i, err := x.Int64()
			if err != nil {
				return 0, fmt.Errorf("%s: %w", n, err)
			}
			return i, nil
		case string:
			i, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", n, err)
			}
			return i, nil
		default:
			return 0, fmt.Errorf("%s: want a number, got %T", n, v)
		}
	}
	return 0, nil
}

// scalarText is the text of a scalar JSON value (a missing value may come as
// a string or, from a lenient encoder, as a number or bool).
func scalarText(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return string(x), nil
	case bool:
		if x {
			return "t", nil
		}
		return "f", nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case int:
		return strconv.Itoa(x), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	}
	return "", fmt.Errorf("want a scalar, got %T", v)
}
