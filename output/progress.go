package output

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/walshadow/walshadow/internal/fsutil"
	"github.com/walshadow/walshadow/internal/wal"
)

// written.json records how far the output's writes are durable on
// ClickHouse: every transaction whose commit LSN is below WrittenBefore has
// all its rows and schema changes applied. The session resumes from what
// was acknowledged, which a crash can leave behind that; transactions the
// output already applied are then skipped instead of applied again (a
// replay would otherwise meet ClickHouse ahead of it: an unchanged TOAST
// column read back from a row a later TRUNCATE already removed).
//
//	{"format": 1, "written_before": "0/3000A28"}
const writtenFile = "written.json"

type writtenState struct {
	Format        int    `json:"format"`
	WrittenBefore string `json:"written_before"`
}

func loadWritten(dir string) (wal.LSN, error) {
	path := filepath.Join(dir, writtenFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var st writtenState
	if err := json.Unmarshal(b, &st); err != nil || st.Format != 1 {
		return 0, fmt.Errorf("%s is corrupt (remove it to re-apply from the session's resume point: rows are idempotent): %v", path, err)
	}
	lsn, err := wal.ParseLSN(st.WrittenBefore)
	if err != nil {
		return 0, fmt.Errorf("%s: written_before: %w", path, err)
	}
	return lsn, nil
}

func saveWritten(dir string, lsn wal.LSN) error {
	b, err := json.Marshal(writtenState{Format: 1, WrittenBefore: lsn.String()})
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(filepath.Join(dir, writtenFile), b, 0o600, nil)
}
