package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/load"
	"github.com/walshadow/walshadow/internal/statefile"
)

func reloadCommand() *cli.Command {
	return &cli.Command{
		Name:      "reload",
		Usage:     "Ask walshadow to reload one table now (a parked one included)",
		ArgsUsage: "[config.yaml] <schema.table> (flags go before them)",
		Description: `Records a request to reload one table in the clickhouse_ddl output's state
directory (state_dir/clickhouse/reload-requests). The running walshadow picks
it up within seconds — or, if it is not running, at its next start — and
reloads the table: a parked table (one whose failure came back the same way
after a reload) is loaded again, a load in progress starts over, a table
that follows the source is reloaded (staged, published in one step, the
others going on). 'walshadow status' lists the request until it is picked
up, and the table under FAILED or INITIAL LOADS after.

The table is named as the configuration names it: schema.table. The state
directory comes from the pipeline config (its walshadow resource, ${ENV}
variables interpolated) or from --state-dir.

Examples:
  walshadow reload resources/pipelines/pg_to_clickhouse.yaml public.orders
  walshadow reload --state-dir ./var/walshadow public.orders`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: flagStateDir, Usage: "the session's state_dir (instead of, or overriding, the config's)"},
			&cli.StringFlag{Name: flagLabel, Usage: "which walshadow resource of the config, when it has several"},
			&cli.StringFlag{Name: flagCHState, Usage: "the clickhouse_ddl output's state_dir, when it sets one (default: clickhouse under the state directory)"},
		},
		Action: runReload,
	}
}

func runReload(c *cli.Context) error {
	args := c.Args().Slice()
	var stateDir, table string
	switch len(args) {
	case 1:
		table = args[0]
	case 2:
		ps, err := readPipelineSession(args[0], c.String(flagLabel))
		if err != nil {
			return cli.Exit("reload: "+err.Error(), exitFatal)
		}
		stateDir, table = ps.StateDir, args[1]
	default:
		return cli.Exit(fmt.Sprintf("reload: give the pipeline config (or --%s) and one table as schema.table, not %d arguments", flagStateDir, len(args)), exitFatal)
	}
	if c.IsSet(flagStateDir) {
		stateDir = c.String(flagStateDir)
	}
	chDir := statefile.OutputDir(c.String(flagCHState))
	if chDir == "" {
		if stateDir == "" {
			return cli.Exit(fmt.Sprintf("reload: no state directory: give a pipeline config or --%s", flagStateDir), exitFatal)
		}
		chDir = statefile.StateDir(stateDir).Output()
	}
	req, err := load.RequestReload(chDir, table, time.Now())
	if err != nil {
		return cli.Exit("reload: "+err.Error(), exitFatal)
	}
	fmt.Fprintf(c.App.Writer, "reload of %s requested (%s): the running walshadow reloads it within seconds, or its next start does; walshadow status lists the request until then\n", table, req.Path)
	if !knownTable(chDir, table) {
		fmt.Fprintf(c.App.Writer, "note: %s is not among the tables this output has written so far; if it replicates no table of that name, the request is dropped with a warning in its log\n", table)
	}
	return nil
}

// knownTable: the output has an agreement or a load of schema.table (as
// far as its state directory tells; unreadable counts as known).
func knownTable(dir statefile.OutputDir, table string) bool {
	agreed, err := clickhouse.ReadAgreed(string(dir))
	if err != nil {
		return true
	}
	for _, a := range agreed {
		if a.Schema+"."+a.Table == table && !a.Dropped {
			return true
		}
	}
	ledger, err := load.ReadLedger(string(dir))
	if err != nil {
		return true
	}
	for _, e := range ledger.All() {
		if e.Schema+"."+e.Table == table {
			return true
		}
	}
	return false
}
