package walstats

import (
	"encoding/json"
	"io"

	"github.com/walshadow/walshadow/internal/wal"
)

// Report is the result of a statistics run, the JSON the
// `walshadow wal stats` subcommand prints. Field names are stable.
//
// Byte counts follow pg_waldump --stats: a record's "record bytes" are its
// xl_tot_len minus the stored size of its full-page images, its "FPI bytes"
// that stored size, and "combined bytes" the sum, xl_tot_len.
type Report struct {
	// StartLSN is the first record counted; EndLSN the end of the last one
	// (EndRecPtr: for XLOG_SWITCH the next segment boundary). pg_waldump
	// prints the same pair as "WAL statistics between START and END".
	StartLSN LSN `json:"start_lsn"`
	EndLSN   LSN `json:"end_lsn"`

	Timeline         uint32 `json:"timeline"` // of the last page header read
	SystemIdentifier uint64 `json:"system_identifier"`
	PGMajor          int    `json:"pg_major"` // from the page magic
	SegmentSize      uint32 `json:"segment_size"`
	SegmentsRead     int    `json:"segments_read"` // segment files loaded
	FirstSegment     string `json:"first_segment"`
	LastSegment      string `json:"last_segment"`

	Records     uint64 `json:"records"`
	TotalBytes  uint64 `json:"total_bytes"` // sum of xl_tot_len
	RecordBytes uint64 `json:"record_bytes"`
	FPICount    uint64 `json:"fpi_count"`
	FPIBytes    uint64 `json:"fpi_bytes"`

	// CRCFailures counts records whose CRC did not match. They are not in
	// the other counts; the scan steps past them. CRCFailureLSNs lists the
	// first MaxCRCFailureLSNs of them.
	CRCFailures    uint64 `json:"crc_failures"`
	CRCFailureLSNs []LSN  `json:"crc_failure_lsns"`

	Stop Stop `json:"stop"`

	// Rmgrs has one entry per resource manager seen, by id; RecordTypes one
	// per (rmgr, record type) seen, by rmgr id then info, the order of
	// pg_waldump --stats=record.
	Rmgrs       []RmgrStats       `json:"rmgrs"`
	RecordTypes []RecordTypeStats `json:"record_types"`
}

// MaxCRCFailureLSNs bounds Report.CRCFailureLSNs so that badly damaged WAL
// does not make the report grow per record.
const MaxCRCFailureLSNs = 100

// StopReason says why a scan ended.
type StopReason string

const (
	// StopEndOfWAL: the reader found the end of valid WAL (a zero record
	// length, a recycled page, or a record cut off by the last file), as
	// pg_waldump's "invalid record length at ...: wanted 24, got 0".
	StopEndOfWAL StopReason = "end_of_wal"
	// StopEndOfInput: the last file ended exactly between records.
	StopEndOfInput StopReason = "end_of_input"
	// StopEndLSN: Options.EndLSN was reached.
	StopEndLSN StopReason = "end_lsn"
	// StopError: a fatal error (corrupt WAL, missing segment, I/O).
	StopError StopReason = "error"
	// StopCanceled: the context was canceled.
	StopCanceled StopReason = "canceled"
)

// Stop is where and why the scan ended.
type Stop struct {
	Reason StopReason `json:"reason"`
	// LSN is the error's position for end_of_wal and error (the end of the
	// last record when an error names none); otherwise the end of the last
	// record read.
	LSN     LSN    `json:"lsn"`
	Message string `json:"message,omitempty"`
}

// Stats are the counters kept per rmgr and per record type.
type Stats struct {
	Count         uint64 `json:"count"`
	RecordBytes   uint64 `json:"record_bytes"`
	FPICount      uint64 `json:"fpi_count"`
	FPIBytes      uint64 `json:"fpi_bytes"`
	CombinedBytes uint64 `json:"combined_bytes"`
}

// RmgrStats are the counters of one resource manager.
type RmgrStats struct {
	ID   uint8  `json:"id"`
	Name string `json:"name"` // pg_waldump's rm_name, e.g. "Heap"
	Stats
}

// RecordTypeStats are the counters of one record type.
type RecordTypeStats struct {
	RmgrID uint8  `json:"rmgr_id"`
	Rmgr   string `json:"rmgr"`
	// Info is the rmgr-owned high nibble of xl_info that identifies the
	// type (for Transaction without the HAS_INFO bit, as pg_waldump).
	Info uint8  `json:"info"`
	Type string `json:"type"` // wal.Identify, e.g. "INSERT+INIT"
	Name string `json:"name"` // "Rmgr/Type" as pg_waldump prints it
	Stats
}

// WriteJSON writes the report as indented JSON followed by a newline.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// LSN is a wal.LSN that marshals as PostgreSQL's "%X/%08X" text.
type LSN wal.LSN

func (l LSN) String() string { return wal.LSN(l).String() }

// MarshalText renders the LSN as "0/016B3748".
func (l LSN) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText parses the "hi/lo" text form.
func (l *LSN) UnmarshalText(text []byte) error {
	v, err := wal.ParseLSN(string(text))
	if err != nil {
		return err
	}
	*l = LSN(v)
	return nil
}
