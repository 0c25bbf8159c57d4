package shadow

import (
	"context"
	"log/slog"
)

// QueryRelocatedCatalogs lists, for every connectable database of the
// source, the catalogs whose relfilenode is at or above FirstNormalObjectID
// (moved by VACUUM FULL or CLUSTER), as the source has them now. The filter
// needs them to tell catalog records from user ones. A database dropped
// while this runs is skipped (a debug line on log, which may be nil).
func QueryRelocatedCatalogs(ctx context.Context, sourceDSN string, log *slog.Logger) ([]RelFile, error) {
	facts, err := querySource(ctx, sourceDSN, "", log)
	if err != nil {
		return nil, err
	}
	out := make([]RelFile, 0, len(facts.relocated))
	for r := range facts.relocated {
		out = append(out, r)
	}
	sortRelFiles(out)
	return out, nil
}
