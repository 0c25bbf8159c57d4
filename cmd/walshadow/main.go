// Command walshadow is the walshadow distribution: a Benthos binary with
// benthos' own pure and io components plus walshadow's (the
// pg_physical_wal input, the walshadow_decode processor, the clickhouse_ddl
// output, the walshadow session resource and the prometheus metrics
// exporter), and walshadow's own subcommands: `wal stats` (pg_waldump
// --stats of WAL files), `status` (a state directory's progress, lag, spool,
// shadow and loads), `preflight` (the start-up checks, without starting),
// `reload` (ask the running walshadow to reload one table) beside Benthos'
// run and lint.
package main

import (
	"context"

	"github.com/redpanda-data/benthos/v4/public/service"

	_ "github.com/redpanda-data/benthos/v4/public/components/io"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"

	_ "github.com/walshadow/walshadow/input"
	_ "github.com/walshadow/walshadow/metrics"
	_ "github.com/walshadow/walshadow/output"
	_ "github.com/walshadow/walshadow/processor"
)

// Set at build time with -ldflags "-X main.Version=... -X main.DateBuilt=...".
var (
	Version   = "dev"
	DateBuilt = "unknown"
)

func main() {
	service.RunCLI(context.Background(), cliOptions()...)
}

// cliOptions configures the Benthos CLI as walshadow's distribution.
func cliOptions() []service.CLIOptFunc {
	env := service.GlobalEnvironment()
	return []service.CLIOptFunc{
		// The default schema leaves out custom resources: use the full one
		// so `lint` and `run` know the walshadow resource.
		service.CLIOptSetMainSchemaFrom(func() *service.ConfigSchema {
			return env.FullConfigSchema(Version, DateBuilt)
		}),
		service.CLIOptSetBinaryName("walshadow"),
		service.CLIOptSetProductName("walshadow"),
		service.CLIOptSetVersion(Version, DateBuilt),
		service.CLIOptAddCommand(walCommand()),
		service.CLIOptAddCommand(preflightCommand()),
		service.CLIOptAddCommand(statusCommand()),
		service.CLIOptAddCommand(reloadCommand()),
		service.CLIOptOnConfigParse(checkMessageForm),
		// No flags of its own: the hook lets lint check what run refuses.
		service.CLIOptCustomRunFlags(nil, lintMessageForm),
	}
}
