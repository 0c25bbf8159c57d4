//go:build ignore

// extract copies the raw bytes of chosen WAL records into golden files:
//
//	go run ./internal/wal/testdata/heap/extract.go -wal DIR -out DIR name=LSN...
//
// Each name=LSN writes the record starting at LSN (as pg_waldump prints it,
// e.g. 0/00638C40) to OUT/name.bin, exactly xl_tot_len bytes.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/walshadow/walshadow/internal/wal"
)

func main() {
	walDir := flag.String("wal", "", "directory of WAL segment files")
	outDir := flag.String("out", ".", "directory for the golden files")
	flag.Parse()
	want := map[wal.LSN]string{}
	for _, arg := range flag.Args() {
		name, lsnText, ok := strings.Cut(arg, "=")
		if !ok {
			log.Fatalf("argument %q: want name=LSN", arg)
		}
		lsn, err := wal.ParseLSN(lsnText)
		if err != nil {
			log.Fatal(err)
		}
		want[lsn] = name
	}
	r, err := wal.NewFileReader(*walDir)
	if err != nil {
		log.Fatal(err)
	}
	for len(want) > 0 {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) || wal.IsKind(err, wal.KindEndOfWAL) {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		name, ok := want[rec.LSN]
		if !ok {
			continue
		}
		delete(want, rec.LSN)
		path := filepath.Join(*outDir, name+".bin")
		if err := os.WriteFile(path, rec.Raw, 0o644); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s %s %s/%#02x %d bytes\n", path, rec.LSN, rec.Header.RmID, rec.Header.Info, len(rec.Raw))
	}
	for lsn, name := range want {
		log.Printf("not found: %s=%s", name, lsn)
	}
	if len(want) > 0 {
		os.Exit(1)
	}
}
