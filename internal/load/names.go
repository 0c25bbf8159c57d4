package load

import "fmt"

// The markers of a load's side tables' names, and the rest of what the
// loads name.
const (
	stagingMarker  = "__wsload_"
	deltaMarker    = "__wsdelta_"
	replacedMarker = "__wsreplaced_"
	staleMarker    = "__wsstale_"
	// progressInterval is how often, in seconds, a load's progress is
	// logged and recorded.
	progressInterval = 5
	// applicationName names the loads' source connections (COPY and
	// BASE_BACKUP) in pg_stat_activity.
	applicationName = "walshadow initial load"
)

// The load's side tables of target: the staging table the load fills, the
// delta table the stream writes until the load is published, the name a
// table found under the target's name at publish is moved to, and the
// name a reload moves this output's own stale table to before dropping it.
func StagingName(target string, oid uint32) string {
	return fmt.Sprintf("%s%s%d", target, stagingMarker, oid)
}

func DeltaName(target string, oid uint32) string {
	return fmt.Sprintf("%s%s%d", target, deltaMarker, oid)
}

func StaleName(target string, oid uint32) string {
	return fmt.Sprintf("%s%s%d", target, staleMarker, oid)
}

func ReplacedName(target string, oid uint32) string {
	return fmt.Sprintf("%s%s%d", target, replacedMarker, oid)
}

// describeLoad names a load in logs.
func describeLoad(e Entry) string {
	return e.Schema + "." + e.Table
}
