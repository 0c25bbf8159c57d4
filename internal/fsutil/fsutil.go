// Package fsutil holds the durable-write primitives walshadow's state files
// share (progress, descriptor-log checkpoint, shadow markers and config).
package fsutil

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces path with data so that a crash leaves the old or
// the new content, never a mix: it writes path+".tmp" with mode perm, fsyncs
// it, calls beforeRename (nil allowed; e.g. to chown the file), renames it
// into place and fsyncs the directory. The temporary file is removed on
// failure.
func WriteFileAtomic(path string, data []byte, perm os.FileMode, beforeRename func(tmp string) error) error {
	return WriteFileAtomicParts(path, [][]byte{data}, perm, beforeRename)
}

// WriteFileAtomicParts is WriteFileAtomic of the parts written one after
// the other (a large file is not copied into one buffer first).
func WriteFileAtomicParts(path string, parts [][]byte, perm os.FileMode, beforeRename func(tmp string) error) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	for _, part := range parts {
		if err == nil {
			_, err = f.Write(part)
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && beforeRename != nil {
		err = beforeRename(tmp)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir fsyncs a directory, making renames and creations in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}
