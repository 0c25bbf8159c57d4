package clickhouse

import "testing"

func TestTruncateTarget(t *testing.T) {
	weird := Target{Database: "d`b", Table: "public.a b\"c"}
	for _, c := range []struct {
		sql  string
		want Target
		ok   bool
	}{
		{TruncateTable(weird), weird, true},
		{"TRUNCATE TABLE `d`.`t`", Target{Database: "d", Table: "t"}, true},
		{"TRUNCATE TABLE IF EXISTS `d`.`t` ON CLUSTER `ws`", Target{}, false},
		{"DROP TABLE IF EXISTS `d`.`t`", Target{}, false},
		{"ALTER TABLE `d`.`t` DELETE WHERE _lsn < 5", Target{}, false},
	} {
		got, ok := truncateTarget(c.sql)
		if ok != c.ok || got != c.want {
			t.Errorf("truncateTarget(%q) = %+v, %v; want %+v, %v", c.sql, got, ok, c.want, c.ok)
		}
	}
	drop := DropPartitions(weird, []string{"all", "o'k"})
	if want := "ALTER TABLE `d\\`b`.`public.a b\"c` DROP PARTITION ID 'all', DROP PARTITION ID 'o\\'k'"; drop != want {
		t.Errorf("DropPartitions = %s\nwant %s", drop, want)
	}
	if one, err := wsCluster.Distribute(drop); err != nil || one != drop {
		t.Errorf("one shard (on the node in use): %s, %v", one, err)
	}
	on, err := wsShards.Distribute(drop)
	if err != nil || on != "ALTER TABLE `d\\`b`.`public.a b\"c` ON CLUSTER `ws` DROP PARTITION ID 'all', DROP PARTITION ID 'o\\'k'" {
		t.Errorf("shards: %s, %v", on, err)
	}
}
