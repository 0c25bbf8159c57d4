package load

// The operator's request to reload one table now (`walshadow reload
// <config.yaml> <schema.table>`). It is a file in the output's state
// directory (statefile.OutputDir.ReloadRequests), one per table, which the
// running output picks up at its start and every few seconds after, acts
// on and removes. A file rather than an HTTP endpoint: benthos' public
// plugin API (v4.78) lets a plugin register no handler on its HTTP
// server; a file reaches the process whether it runs now or starts
// later (a request made while walshadow is down is honoured at its
// start), survives a restart until it is acted on, needs no port or
// credentials beyond write access to the state directory, and
// `walshadow status` can show it while it waits.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/walshadow/walshadow/internal/fsutil"
	"github.com/walshadow/walshadow/internal/statefile"
)

// ReloadRequest is a request to reload one table.
type ReloadRequest struct {
	// Table is the source table as the configuration names it:
	// schema.table.
	Table string
	// At is when it was asked for.
	At time.Time
	// Path is its file.
	Path string
}

// requestSpec is a request file's envelope.
var requestSpec = statefile.Spec{Format: "walshadow-reload-request", Version: 1,
	Remedy: "remove it and ask again with walshadow reload"}

type requestBody struct {
	Table       string `json:"table"`
	RequestedAt string `json:"requested_at"`
}

// requestPath is the file of a request for table: named by a digest of
// the name (which may be longer than a file name, or hold any character).
func requestPath(dir statefile.OutputDir, table string) string {
	sum := sha256.Sum256([]byte(table))
	return filepath.Join(dir.ReloadRequests(), hex.EncodeToString(sum[:8])+".json")
}

// RequestReload records a request to reload table (schema.table) at now,
// durably; a request for the table already waiting is replaced.
func RequestReload(dir statefile.OutputDir, table string, now time.Time) (ReloadRequest, error) {
	if !strings.Contains(table, ".") || strings.HasPrefix(table, ".") || strings.HasSuffix(table, ".") || !utf8.ValidString(table) {
		return ReloadRequest{}, fmt.Errorf("%q: name the table as schema.table", table)
	}
	if err := os.MkdirAll(dir.ReloadRequests(), 0o700); err != nil {
		return ReloadRequest{}, fmt.Errorf("making %s: %w", dir.ReloadRequests(), err)
	}
	if err := fsutil.SyncDir(string(dir)); err != nil {
		return ReloadRequest{}, err
	}
	r := ReloadRequest{Table: table, At: now.UTC(), Path: requestPath(dir, table)}
	if err := requestSpec.Write(r.Path, requestBody{Table: table, RequestedAt: encodeTime(r.At)}); err != nil {
		return ReloadRequest{}, err
	}
	return r, nil
}

// ReloadRequests are the requests waiting in dir, oldest first. A file
// that cannot be read is returned in bad (by path, with why) for the
// caller to report and remove.
func ReloadRequests(dir statefile.OutputDir) (reqs []ReloadRequest, bad map[string]error, err error) {
	ents, err := os.ReadDir(dir.ReloadRequests())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the reload requests: %w", err)
	}
	for _, de := range ents {
		if !de.Type().IsRegular() || !strings.HasSuffix(de.Name(), ".json") {
			continue // (a write in progress ends in .tmp)
		}
		path := filepath.Join(dir.ReloadRequests(), de.Name())
		var body requestBody
		if err := requestSpec.Read(path, &body, nil); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // taken meanwhile
			}
			if bad == nil {
				bad = map[string]error{}
			}
			bad[path] = err
			continue
		}
		at, terr := decodeTime(body.RequestedAt)
		if terr != nil || body.Table == "" {
			if bad == nil {
				bad = map[string]error{}
			}
			bad[path] = requestSpec.Corrupt(path, fmt.Errorf("table %q, requested_at %q", body.Table, body.RequestedAt))
			continue
		}
		reqs = append(reqs, ReloadRequest{Table: body.Table, At: at, Path: path})
	}
	slices.SortFunc(reqs, func(a, b ReloadRequest) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.Table, b.Table)
	})
	return reqs, bad, nil
}

// Done removes the request once it is acted on (gone already is fine). A
// newer request for the same table written meanwhile is kept.
func (r ReloadRequest) Done() error {
	var body requestBody
	if err := requestSpec.Read(r.Path, &body, nil); err == nil {
		if at, terr := decodeTime(body.RequestedAt); terr == nil && at.After(r.At) {
			return nil // asked again since: that one waits
		}
	}
	if err := os.Remove(r.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the reload request %s: %w", r.Path, err)
	}
	return nil
}

// RemoveRequestFile removes a request file that cannot be read.
func RemoveRequestFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
