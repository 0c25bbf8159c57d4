// Command walshadow is the walshadow distribution: a Benthos binary with
// benthos' own pure and io components plus walshadow's (registered by later
// packages), and walshadow's own subcommands (`wal stats`).
package main

import (
	"context"

	"github.com/redpanda-data/benthos/v4/public/service"

	_ "github.com/redpanda-data/benthos/v4/public/components/io"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
)

// Set at build time with -ldflags "-X main.Version=... -X main.DateBuilt=...".
var (
	Version   = "dev"
	DateBuilt = "unknown"
)

func main() {
	service.RunCLI(context.Background(),
		service.CLIOptSetBinaryName("walshadow"),
		service.CLIOptSetProductName("walshadow"),
		service.CLIOptSetVersion(Version, DateBuilt),
		service.CLIOptAddCommand(walCommand()),
	)
}
