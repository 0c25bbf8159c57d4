package pagewalk

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// spoolRecordHeader: relfilenode u32, block u32, item u16, tuple length u32.
const spoolRecordHeader = 14

// spool keeps tuples whose fate is decided after the archive has been read.
// Records live in memory while the walk's shared budget allows, then the
// memory part is written to a temp file in dir (no dir: an error).
type spool struct {
	dir     string
	budget  *int64 // memory left, shared by the walk's spools
	limit   int
	mem     []byte
	file    *os.File
	records int64
	spilled int64
}

type spooled struct {
	rfn   uint32
	block uint32
	item  int
	tuple []byte
}

func (s *spool) add(rfn, block uint32, item int, tuple []byte) error {
	n := spoolRecordHeader + len(tuple)
	if int64(n) > *s.budget {
		if err := s.spill(); err != nil {
			return err
		}
	}
	var hdr [spoolRecordHeader]byte
	binary.LittleEndian.PutUint32(hdr[0:], rfn)
	binary.LittleEndian.PutUint32(hdr[4:], block)
	binary.LittleEndian.PutUint16(hdr[8:], uint16(item))
	binary.LittleEndian.PutUint32(hdr[10:], uint32(len(tuple)))
	if s.file != nil && int64(n) > *s.budget {
		// Larger than the whole budget: straight to the file.
		if _, err := s.file.Write(hdr[:]); err != nil {
			return fmt.Errorf("spilling a deferred tuple to %s: %w", s.file.Name(), err)
		}
		if _, err := s.file.Write(tuple); err != nil {
			return fmt.Errorf("spilling a deferred tuple to %s: %w", s.file.Name(), err)
		}
		s.spilled += int64(n)
		s.records++
		return nil
	}
	s.mem = append(s.mem, hdr[:]...)
	s.mem = append(s.mem, tuple...)
	*s.budget -= int64(n)
	s.records++
	return nil
}

// spill moves the memory part to the spill file.
func (s *spool) spill() error {
	if s.dir == "" {
		return fmt.Errorf("deferred tuples exceed the %d-byte spool budget and no spill directory is set", s.limit)
	}
	if s.file == nil {
		f, err := os.CreateTemp(s.dir, "pagewalk-spool-*")
		if err != nil {
			return fmt.Errorf("creating a spill file in %s: %w", s.dir, err)
		}
		s.file = f
	}
	if _, err := s.file.Write(s.mem); err != nil {
		return fmt.Errorf("spilling deferred tuples to %s: %w", s.file.Name(), err)
	}
	s.spilled += int64(len(s.mem))
	*s.budget += int64(len(s.mem))
	s.mem = s.mem[:0]
	return nil
}

// each replays the records in the order added: the file's, then memory's.
// r.tuple is valid during fn only.
func (s *spool) each(fn func(r spooled) error) error {
	if s.file != nil {
		if _, err := s.file.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("rewinding spill file %s: %w", s.file.Name(), err)
		}
		br := bufio.NewReaderSize(s.file, 1<<16)
		var buf []byte
		for {
			var hdr [spoolRecordHeader]byte
			if _, err := io.ReadFull(br, hdr[:]); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return fmt.Errorf("reading spill file %s: %w", s.file.Name(), err)
			}
			n := int(binary.LittleEndian.Uint32(hdr[10:]))
			if cap(buf) < n {
				buf = make([]byte, n)
			}
			buf = buf[:n]
			if _, err := io.ReadFull(br, buf); err != nil {
				return fmt.Errorf("reading spill file %s: %w", s.file.Name(), err)
			}
			if err := fn(decodeSpooled(hdr[:], buf)); err != nil {
				return err
			}
		}
	}
	for b := s.mem; len(b) > 0; {
		n := int(binary.LittleEndian.Uint32(b[10:]))
		if err := fn(decodeSpooled(b, b[spoolRecordHeader:spoolRecordHeader+n])); err != nil {
			return err
		}
		b = b[spoolRecordHeader+n:]
	}
	return nil
}

func decodeSpooled(hdr, tuple []byte) spooled {
	return spooled{
		rfn:   binary.LittleEndian.Uint32(hdr[0:]),
		block: binary.LittleEndian.Uint32(hdr[4:]),
		item:  int(binary.LittleEndian.Uint16(hdr[8:])),
		tuple: tuple,
	}
}

// close releases memory and removes the spill file.
func (s *spool) close() error {
	*s.budget += int64(len(s.mem))
	s.mem = nil
	if s.file == nil {
		return nil
	}
	name := s.file.Name()
	err := s.file.Close()
	if rmErr := os.Remove(name); err == nil {
		err = rmErr
	}
	s.file = nil
	if err != nil {
		return fmt.Errorf("removing spill file %s: %w", name, err)
	}
	return nil
}
