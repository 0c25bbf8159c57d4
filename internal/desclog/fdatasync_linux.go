package desclog

import (
	"os"
	"syscall"
)

// fdatasync flushes a file's data (and the size change an append makes)
// without forcing unrelated metadata out.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
