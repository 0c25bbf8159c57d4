package output

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	clickhousego "github.com/ClickHouse/clickhouse-go/v2"
)

// TestTableLocal: which errors fail one table and which fail the batch.
func TestTableLocal(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		local bool
	}{
		{"a conversion of walshadow's", errors.New(`column "v": value "NaN" does not fit Decimal(4, 4)`), true},
		{"a ClickHouse type mismatch", fmt.Errorf("inserting: %w", &clickhousego.Exception{Code: 53, Message: "Type mismatch"}), true},
		{"one query's memory limit", &clickhousego.Exception{Code: 241, Message: "Memory limit (for query) exceeded: would use 1.86 GiB"}, true},
		{"the server's memory limit", &clickhousego.Exception{Code: 241, Message: "Memory limit (total) exceeded"}, false},
		{"disk full", &clickhousego.Exception{Code: 243, Message: "Not enough space"}, false},
		{"access denied", &clickhousego.Exception{Code: 497, Message: "not enough privileges"}, false},
		{"a transient exception", &clickhousego.Exception{Code: 252, Message: "Too many parts"}, false},
		{"a lost connection", fmt.Errorf("inserting: %w", io.ErrUnexpectedEOF), false},
		{"cancelled", context.Canceled, false},
		{"the output's own state", globalf("recording the agreed shape: disk full"), false},
		{"a reload of a new shape", &reloadNeeded{cause: errors.New("narrowing")}, true},
	} {
		if got := tableLocal(tc.err); got != tc.local {
			t.Errorf("%s (%v): table-local %v, want %v", tc.name, tc.err, got, tc.local)
		}
	}
}
