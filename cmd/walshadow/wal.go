package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/urfave/cli/v2"

	"github.com/walshadow/walshadow/internal/wal"
	"github.com/walshadow/walshadow/internal/walstats"
)

const (
	flagStart = "start"
	flagEnd   = "end"
)

// Exit codes of `wal stats`, documented in its help.
const (
	exitFatal       = 1
	exitCRCFailures = 2
)

func walCommand() *cli.Command {
	return &cli.Command{
		Name:  "wal",
		Usage: "Inspect PostgreSQL physical WAL",
		Subcommands: []*cli.Command{{
			Name:      "stats",
			Usage:     "Parse WAL segment files and print statistics as JSON",
			ArgsUsage: "<segment files or directories>...",
			Description: `Reads the given WAL segment files (a directory stands for the segment
files in it, in WAL order) with walshadow's decoder, verifying page headers,
the xl_prev chain and every record's CRC-32C, and prints as JSON: record
count, total bytes, per resource manager and per record type counts and
bytes (record bytes exclude full-page images, as pg_waldump --stats does),
full-page image count and bytes, CRC failures, and where and why the scan
ended. Records with a bad CRC are counted and skipped.

Exit status: 0 on success, 1 when the WAL could not be read (the partial
report is still printed, with the error and its LSN), 2 when any record
failed its CRC check.

Example:
  walshadow wal stats /var/lib/postgresql/15/main/pg_wal
  walshadow wal stats --start 0/3000028 000000010000000000000003`,
			Flags: []cli.Flag{
				&cli.StringFlag{Name: flagStart, Usage: "count only records starting at or after this LSN (e.g. 0/3000028)"},
				&cli.StringFlag{Name: flagEnd, Usage: "stop at the first record starting at or after this LSN"},
			},
			Action: walStats,
		}},
	}
}

func walStats(c *cli.Context) error {
	if c.NArg() == 0 {
		return cli.Exit("wal stats: give at least one WAL segment file or directory", exitFatal)
	}
	var opts walstats.Options
	for name, dst := range map[string]*wal.LSN{flagStart: &opts.StartLSN, flagEnd: &opts.EndLSN} {
		if s := c.String(name); s != "" {
			lsn, err := wal.ParseLSN(s)
			if err != nil {
				return cli.Exit(fmt.Sprintf("wal stats: --%s: %v", name, err), exitFatal)
			}
			*dst = lsn
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := walstats.Collect(ctx, c.Args().Slice(), opts)
	if rep != nil {
		if werr := rep.WriteJSON(c.App.Writer); werr != nil {
			return cli.Exit(fmt.Sprintf("wal stats: writing report: %v", werr), exitFatal)
		}
	}
	if err != nil {
		return cli.Exit(fmt.Sprintf("wal stats: %v", err), exitFatal)
	}
	if rep.CRCFailures > 0 {
		return cli.Exit(fmt.Sprintf("wal stats: %d records failed their CRC check", rep.CRCFailures), exitCRCFailures)
	}
	return nil
}
