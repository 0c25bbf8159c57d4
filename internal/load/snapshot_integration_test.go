package load

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/testrig"
)

// TestInvisibleSQLMatchesSees: the copy-back's ClickHouse condition keeps
// exactly the xids sees rejects, on the real server (18.16's integer
// arithmetic included).
func TestInvisibleSQLMatchesSees(t *testing.T) {
	ch := testrig.StartClickHouse(t)
	rng := rand.New(rand.NewSource(7))
	for _, s := range []pgSnapshot{
		{xmin: 100, xmax: 110, xip: []uint64{103, 107}},
		{xmin: 5000, xmax: 5000},
		{xmin: 1<<32 + 1<<32 - 5, xmax: 2<<32 + 3, xip: []uint64{2<<32 + 1, 1<<32 + 1<<32 - 2}},
	} {
		xids := []uint32{0, 1, 2, 3, 4, 99, 100, 101, 103, 107, 109, 110, 4999, 5000, 5001, 1<<32 - 1, 1<<32 - 5, 1<<32 - 2, 1 << 31}
		for range 200 {
			xids = append(xids, uint32(s.xmin)+uint32(rng.Intn(40))-20, rng.Uint32())
		}
		var values []string
		for _, x := range xids {
			values = append(values, fmt.Sprint(x))
		}
		sql := fmt.Sprintf("SELECT _xid FROM (SELECT arrayJoin([%s]) AS _xid) WHERE %s ORDER BY _xid FORMAT TSV",
			strings.Join(values, ", "), s.invisibleSQL())
		// The array's element type is the smallest that holds every value;
		// the column is UInt32 on the tables.
		sql = strings.Replace(sql, "arrayJoin([", "arrayJoin(arrayMap(x -> toUInt32(x), [", 1)
		sql = strings.Replace(sql, "]) AS _xid", "])) AS _xid", 1)
		out, err := ch.Query(context.Background(), sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		got := map[uint32]bool{}
		for _, line := range strings.Fields(out) {
			var x uint32
			fmt.Sscan(line, &x)
			got[x] = true
		}
		for _, x := range xids {
			if got[x] == s.sees(x) {
				t.Errorf("snapshot %+v: xid %d: copied back %v, but sees = %v", s, x, got[x], s.sees(x))
			}
		}
	}
}
