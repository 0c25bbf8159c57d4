package msg

import (
	"fmt"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// Strings is m's metadata as strings: what is set as a string, other
// values as fmt prints them, and the typed record or change rendered for
// every key not set otherwise (what `metadata: all` would have set).
func Strings(m *service.Message) map[string]string {
	out := map[string]string{}
	var typed []any
	_ = m.MetaWalkMut(func(k string, v any) error {
		switch t := v.(type) {
		case string:
			out[k] = t
		case *Change, *Record:
			typed = append(typed, t)
		case *Records:
			out[k] = fmt.Sprintf("%d records", len(t.Records))
		case *Changes:
			out[k] = fmt.Sprintf("%d changes", len(t.Changes))
		default:
			out[k] = fmt.Sprint(v)
		}
		return nil
	})
	// Rendered after the walk: a key set as a string wins, whatever the
	// map's order.
	set := func(k, v string) {
		if _, ok := out[k]; !ok {
			out[k] = v
		}
	}
	for _, v := range typed {
		switch t := v.(type) {
		case *Change:
			t.AppendStrings(true, set)
		case *Record:
			t.AppendStrings(set)
		}
	}
	return out
}
