package testrig

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/walshadow/walshadow/internal/wal"
)

// pg_waldump is the oracle the WAL decoder is checked against: record counts
// and sizes per record type (--stats=record) and full-page images per block
// reference (--bkp-details). Formats are those of PostgreSQL 15's
// src/bin/pg_waldump/pg_waldump.c (XLogDumpStatsRow, XLogDumpDisplayStats)
// and src/backend/access/rmgrdesc/xlogdesc.c (XLogRecGetBlockRefInfo).

// WaldumpRow is one line of pg_waldump --stats output.
type WaldumpRow struct {
	// Rmgr is the resource manager name, e.g. "Heap".
	Rmgr string
	// Type is the record type after the slash, e.g. "INSERT+INIT"; empty in
	// per-rmgr statistics (--stats without =record) and in the totals.
	Type string
	// Count is the number of records (N).
	Count uint64
	// RecordBytes is the record size without full-page images, FPIBytes the
	// image bytes (bimg_len, after hole removal and compression), and
	// CombinedBytes their sum.
	RecordBytes, FPIBytes, CombinedBytes uint64
}

// WaldumpStop is where and why pg_waldump stopped before the end of its
// input at what it considers the end of valid WAL.
type WaldumpStop struct {
	// LastRecord is the start of the last record read successfully: PG15's
	// "error in WAL record at %X/%X" names it, not the failing position.
	// Zero when no record was read.
	LastRecord wal.LSN
	// End is where the next record would start and no valid one does, when
	// the message names it ("invalid record length at ...", "could not find
	// a valid record after ..."); zero for page-header complaints, which
	// name a segment file and offset instead.
	End wal.LSN
	// Msg is the message after the LSN, e.g.
	// "invalid record length at 0/1C024C8: wanted 24, got 0".
	Msg string
}

// WaldumpReport is pg_waldump --stats=record output.
type WaldumpReport struct {
	// Start is the first record read and End the end of the last one
	// ("WAL statistics between Start and End"); both zero when no record was
	// read.
	Start, End wal.LSN
	// Rows are the per-type lines in pg_waldump's order (rmgr id, then info).
	Rows []WaldumpRow
	// Totals is the Total line (Rmgr "Total").
	Totals WaldumpRow
	// Stop is set when pg_waldump reported the end of valid WAL before the
	// end of the last segment, which is normal for WAL still being written.
	Stop *WaldumpStop
}

// Find returns the row of record type rmgr/typ, e.g. ("Heap", "INSERT").
func (r *WaldumpReport) Find(rmgr, typ string) (WaldumpRow, bool) {
	for _, row := range r.Rows {
		if row.Rmgr == rmgr && row.Type == typ {
			return row, true
		}
	}
	return WaldumpRow{}, false
}

// Rmgr sums the rows of one resource manager, e.g. "Transaction".
func (r *WaldumpReport) Rmgr(rmgr string) WaldumpRow {
	sum := WaldumpRow{Rmgr: rmgr}
	for _, row := range r.Rows {
		if row.Rmgr == rmgr {
			sum.Count += row.Count
			sum.RecordBytes += row.RecordBytes
			sum.FPIBytes += row.FPIBytes
			sum.CombinedBytes += row.CombinedBytes
		}
	}
	return sum
}

// WaldumpStats runs pg_waldump --stats=record -p walDir startSeg [endSeg]
// (bindir holds pg_waldump; endSeg may be empty) and parses its table. An
// end-of-WAL error from pg_waldump is reported in Stop, not as an error.
func WaldumpStats(ctx context.Context, bindir, walDir, startSeg, endSeg string) (*WaldumpReport, error) {
	cmd := waldumpCommand(ctx, bindir, walDir, startSeg, endSeg, "--stats=record")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	stop, err := waldumpExit(cmd, runErr, stderr.Bytes())
	if err != nil {
		return nil, err
	}
	report, err := ParseWaldumpStats(stdout.Bytes())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), err)
	}
	report.Stop = stop
	return report, nil
}

var (
	statsHeaderLine = regexp.MustCompile(`^WAL statistics between ([0-9A-F]+/[0-9A-F]+) and ([0-9A-F]+/[0-9A-F]+):$`)
	// A row: name, then four "value (pct)" pairs; the name may hold spaces
	// ("Heap/UNKNOWN (70)"), and %6.02f pads inside the parentheses.
	statsRowLine = regexp.MustCompile(`^(\S.*?)\s+(\d+) \(\s*[\d.]+\)\s+(\d+) \(\s*[\d.]+\)\s+(\d+) \(\s*[\d.]+\)\s+(\d+) \(\s*[\d.]+\)$`)
	// Total: the count without a percentage, then sizes with [pct%].
	statsTotalLine   = regexp.MustCompile(`^Total\s+(\d+)\s+(\d+) \[[\d.]+%\]\s+(\d+) \[[\d.]+%\]\s+(\d+) \[100%\]$`)
	statsColumnsLine = regexp.MustCompile(`^Type\s+N\s+\(%\)\s+Record size\s+\(%\)\s+FPI size\s+\(%\)\s+Combined size\s+\(%\)$`)
	statsRuleLine    = regexp.MustCompile(`^[\s-]+$`)
)

// ParseWaldumpStats parses the stdout of pg_waldump --stats or
// --stats=record. Empty output (pg_waldump read no record) gives an empty
// report. Any line it does not recognise, a missing Total line or rows that
// do not add up to it are errors: a format drift must not go unnoticed.
func ParseWaldumpStats(out []byte) (*WaldumpReport, error) {
	r := &WaldumpReport{}
	var sawHeader, sawTotal bool
	for i, line := range strings.Split(string(out), "\n") {
		lineNo := i + 1
		switch {
		case line == "" || strings.HasPrefix(line, "first record is after "):
		case statsHeaderLine.MatchString(line):
			m := statsHeaderLine.FindStringSubmatch(line)
			start, err1 := wal.ParseLSN(m[1])
			end, err2 := wal.ParseLSN(m[2])
			if err := errors.Join(err1, err2); err != nil {
				return nil, fmt.Errorf("line %d: %w", lineNo, err)
			}
			r.Start, r.End, sawHeader = start, end, true
		case statsColumnsLine.MatchString(line), statsRuleLine.MatchString(line):
		case statsTotalLine.MatchString(line):
			if sawTotal {
				return nil, fmt.Errorf("line %d: second Total line", lineNo)
			}
			row, err := parseCounts("Total", statsTotalLine.FindStringSubmatch(line)[1:])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", lineNo, err)
			}
			r.Totals, sawTotal = row, true
		case statsRowLine.MatchString(line):
			if !sawHeader || sawTotal {
				return nil, fmt.Errorf("line %d: statistics row outside the table: %q", lineNo, line)
			}
			m := statsRowLine.FindStringSubmatch(line)
			row, err := parseCounts(m[1], m[2:])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", lineNo, err)
			}
			r.Rows = append(r.Rows, row)
		default:
			return nil, fmt.Errorf("line %d: unrecognised pg_waldump output: %q", lineNo, line)
		}
	}
	if !sawHeader && !sawTotal && len(r.Rows) == 0 {
		return r, nil
	}
	if !sawHeader || !sawTotal {
		return nil, fmt.Errorf("truncated pg_waldump statistics (header %v, total %v)", sawHeader, sawTotal)
	}
	sum := WaldumpRow{Rmgr: "Total"}
	for _, row := range r.Rows {
		sum.Count += row.Count
		sum.RecordBytes += row.RecordBytes
		sum.FPIBytes += row.FPIBytes
		sum.CombinedBytes += row.CombinedBytes
	}
	if sum != r.Totals {
		return nil, fmt.Errorf("pg_waldump rows add up to %+v, Total line says %+v", sum, r.Totals)
	}
	return r, nil
}

// parseCounts builds a row named "Rmgr/Type" from four decimal columns.
func parseCounts(name string, cols []string) (WaldumpRow, error) {
	var v [4]uint64
	for i, c := range cols {
		n, err := strconv.ParseUint(c, 10, 64)
		if err != nil {
			return WaldumpRow{}, fmt.Errorf("%s: %w", name, err)
		}
		v[i] = n
	}
	if v[1]+v[2] != v[3] {
		return WaldumpRow{}, fmt.Errorf("%s: record %d + FPI %d bytes != combined %d", name, v[1], v[2], v[3])
	}
	rmgr, typ, _ := strings.Cut(name, "/")
	return WaldumpRow{Rmgr: rmgr, Type: typ, Count: v[0], RecordBytes: v[1], FPIBytes: v[2], CombinedBytes: v[3]}, nil
}

// WaldumpFPIs counts full-page images in pg_waldump --bkp-details output.
type WaldumpFPIs struct {
	// Records is the number of records listed, Images the block references
	// carrying an image ("(FPW"), of which Verification are images kept only
	// for wal_consistency_checking ("(FPW for WAL verification)").
	Records, Images, Verification uint64
	// RecordsWithImages is the number of records with at least one image.
	RecordsWithImages uint64
	// LastLSN is the start of the last record listed.
	LastLSN wal.LSN
	// Stop is set when pg_waldump stopped at the end of valid WAL; Stop.End
	// is then, when known, the end LSN it reached.
	Stop *WaldumpStop
}

// WaldumpFPICount runs pg_waldump --bkp-details -p walDir startSeg [endSeg]
// and counts full-page images. The output is streamed, so large WAL does not
// have to fit in memory.
func WaldumpFPICount(ctx context.Context, bindir, walDir, startSeg, endSeg string) (*WaldumpFPIs, error) {
	cmd := waldumpCommand(ctx, bindir, walDir, startSeg, endSeg, "--bkp-details")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	fpis, parseErr := ParseWaldumpFPIs(stdout)
	if parseErr != nil {
		io.Copy(io.Discard, stdout) // let pg_waldump finish instead of blocking on the pipe
	}
	runErr := cmd.Wait()
	stop, err := waldumpExit(cmd, runErr, stderr.Bytes())
	if err != nil {
		return nil, err
	}
	if parseErr != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), parseErr)
	}
	fpis.Stop = stop
	return fpis, nil
}

var (
	// XLogDumpDisplayRecord: "rmgr: %-11s len (rec/tot): %6u/%6u, tx: %10u, lsn: %X/%08X, prev %X/%08X, desc: ..."
	recordLine = regexp.MustCompile(`^rmgr: \S+\s+len \(rec/tot\):\s+\d+/\s*\d+, tx:\s+\d+, lsn: ([0-9A-F]+/[0-9A-F]+), prev [0-9A-F]+/[0-9A-F]+, desc: `)
	// XLogRecGetBlockRefInfo, detailed and pretty: "\tblkref #%d: rel %u/%u/%u fork %s blk %u[ (FPW...)]"
	blockRefLine = regexp.MustCompile(`^\tblkref #\d+: rel \d+/\d+/\d+ fork \S+ blk \d+( \(FPW( for WAL verification)?\); hole: .*)?$`)
)

// ParseWaldumpFPIs parses pg_waldump --bkp-details output: each record line
// is followed by one tab-indented line per block reference.
func ParseWaldumpFPIs(r io.Reader) (*WaldumpFPIs, error) {
	f := &WaldumpFPIs{}
	sc := bufio.NewScanner(r)
	// Record descriptions (commit invalidations, running xacts) can be long.
	sc.Buffer(make([]byte, 0, 64*1024), 64*1024*1024)
	lineNo := 0
	inRecord, recordHasImage := false, false
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if m := recordLine.FindStringSubmatch(line); m != nil {
			lsn, err := wal.ParseLSN(m[1])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", lineNo, err)
			}
			f.Records++
			f.LastLSN = lsn
			inRecord, recordHasImage = true, false
			continue
		}
		if m := blockRefLine.FindStringSubmatch(line); m != nil {
			if !inRecord {
				return nil, fmt.Errorf("line %d: block reference before any record", lineNo)
			}
			if m[1] != "" {
				f.Images++
				if m[2] != "" {
					f.Verification++
				}
				if !recordHasImage {
					f.RecordsWithImages++
					recordHasImage = true
				}
			}
			continue
		}
		if line == "" || strings.HasPrefix(line, "first record is after ") {
			continue
		}
		if strings.HasPrefix(line, "\tblkref") {
			return nil, fmt.Errorf("line %d: unrecognised block reference: %q", lineNo, line)
		}
		// Multi-line descriptions continue the record; only block lines count.
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading pg_waldump output: %w", err)
	}
	return f, nil
}

func waldumpCommand(ctx context.Context, bindir, walDir, startSeg, endSeg, mode string) *exec.Cmd {
	args := []string{mode, "-p", walDir, startSeg}
	if endSeg != "" {
		args = append(args, endSeg)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bindir, "pg_waldump"), args...)
	// The parsers expect the untranslated messages.
	cmd.Env = append(CleanPGEnv(), "LC_ALL=C")
	return cmd
}

// waldumpErrorLine is pg_fatal's "error in WAL record at %X/%X: %s".
var waldumpErrorLine = regexp.MustCompile(`(?m)^pg_waldump: error: error in WAL record at ([0-9A-F]+/[0-9A-F]+): (.*)$`)

// endOfWALMessages are the xlogreader complaints that mean "no more valid
// WAL here" rather than damage: zeroed space after the last record, a
// preallocated or recycled page, or a stale record from a recycled segment.
// The capture group, when present, is the position of the missing record.
var endOfWALMessages = []*regexp.Regexp{
	regexp.MustCompile(`^invalid record length at ([0-9A-F]+/[0-9A-F]+): wanted \d+, got 0$`),
	regexp.MustCompile(`^invalid magic number 0000 in log segment \S+, offset \d+$`),
	regexp.MustCompile(`^unexpected pageaddr [0-9A-F]+/[0-9A-F]+ in log segment \S+, offset \d+$`),
	regexp.MustCompile(`^record with incorrect prev-link [0-9A-F]+/[0-9A-F]+ at ([0-9A-F]+/[0-9A-F]+)$`),
}

// noRecordLine is pg_fatal's "could not find a valid record after %X/%X",
// printed when the range holds no record at all.
var noRecordLine = regexp.MustCompile(`(?m)^pg_waldump: error: (could not find a valid record after ([0-9A-F]+/[0-9A-F]+))$`)

// waldumpExit classifies pg_waldump's exit: success, a normal end-of-WAL stop
// (returned as a WaldumpStop), or an error carrying its stderr.
func waldumpExit(cmd *exec.Cmd, runErr error, stderr []byte) (*WaldumpStop, error) {
	if runErr == nil {
		return nil, nil
	}
	var exitErr *exec.ExitError
	if !errors.As(runErr, &exitErr) {
		return nil, fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), runErr)
	}
	stop, ok := ParseWaldumpStop(stderr)
	if !ok {
		return nil, fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), runErr, strings.TrimSpace(string(stderr)))
	}
	return stop, nil
}

// ParseWaldumpStop recognises an end-of-WAL error in pg_waldump's stderr and
// returns where it stopped; ok is false for any other error.
func ParseWaldumpStop(stderr []byte) (stop *WaldumpStop, ok bool) {
	if m := waldumpErrorLine.FindSubmatch(stderr); m != nil {
		last, err := wal.ParseLSN(string(m[1]))
		if err != nil {
			return nil, false
		}
		msg := string(m[2])
		for _, re := range endOfWALMessages {
			sub := re.FindStringSubmatch(msg)
			if sub == nil {
				continue
			}
			stop := &WaldumpStop{LastRecord: last, Msg: msg}
			if len(sub) > 1 {
				if stop.End, err = wal.ParseLSN(sub[1]); err != nil {
					return nil, false
				}
			}
			return stop, true
		}
		return nil, false
	}
	if m := noRecordLine.FindSubmatch(stderr); m != nil {
		end, err := wal.ParseLSN(string(m[2]))
		if err != nil {
			return nil, false
		}
		return &WaldumpStop{End: end, Msg: string(m[1])}, true
	}
	return nil, false
}
