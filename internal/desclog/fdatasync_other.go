//go:build !linux

package desclog

import "os"

func fdatasync(f *os.File) error { return f.Sync() }
