package output

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/walshadow/walshadow/internal/statefile"
	"github.com/walshadow/walshadow/internal/wal"
)

// written.json (statefile.OutputDir.Written) records how far the output's
// writes are durable on ClickHouse: every transaction whose commit LSN is
// below written_before has all its rows and schema changes applied. The
// session resumes from what was acknowledged, which a crash can leave
// behind that; transactions the output already applied are then skipped
// instead of applied again (a replay would otherwise meet ClickHouse ahead
// of it: an unchanged TOAST column read back from a row a later TRUNCATE
// already removed). In the statefile envelope:
//
//	"format": "walshadow-written", "version": 2,
//	"body": {"written_before": "0/3000A28"}
//
// Version 1 was {"format": 1, "written_before": "0/3000A28"}, without a
// checksum; it is read once and rewritten in the envelope.
var writtenSpec = statefile.Spec{Format: "walshadow-written", Version: 2,
	Remedy: "remove it to re-apply from the session's resume point (every write is idempotent)"}

type writtenBody struct {
	WrittenBefore string `json:"written_before"`
}

// ReadWritten reads an output state directory's written.json: the commit
// LSN below which every transaction is applied, and when the file was last
// written. No file: 0 and the zero time.
func ReadWritten(dir statefile.OutputDir) (wal.LSN, time.Time, error) {
	path := dir.Written()
	var body writtenBody
	err := writtenSpec.Read(path, &body, func(data []byte) error { return readWrittenV1(data, &body) })
	if errors.Is(err, fs.ErrNotExist) {
		return 0, time.Time{}, nil
	}
	if err != nil {
		return 0, time.Time{}, err
	}
	lsn, err := wal.ParseLSN(body.WrittenBefore)
	if err != nil {
		return 0, time.Time{}, writtenSpec.Corrupt(path, fmt.Errorf("written_before: %w", err))
	}
	var at time.Time
	if info, err := os.Stat(path); err == nil {
		at = info.ModTime()
	}
	return lsn, at, nil
}

// readWrittenV1 reads written.json's first form.
func readWrittenV1(data []byte, body *writtenBody) error {
	var v1 struct {
		Format        int    `json:"format"`
		WrittenBefore string `json:"written_before"`
	}
	if err := statefile.DecodeStrict(data, &v1); err != nil {
		return err
	}
	if v1.Format != 1 {
		return fmt.Errorf("format %d, this walshadow reads format 1 or the walshadow-written envelope", v1.Format)
	}
	body.WrittenBefore = v1.WrittenBefore
	return nil
}

func saveWritten(dir statefile.OutputDir, lsn wal.LSN) error {
	return writtenSpec.Write(dir.Written(), writtenBody{WrittenBefore: lsn.String()})
}
