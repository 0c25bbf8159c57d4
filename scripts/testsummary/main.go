// Command testsummary reads `go test -json` on stdin, prints the ordinary
// test output (package results, and the full output of failing tests), and
// ends with one plain closing line: "tests: N passed, N failed, N skipped".
// It exits non-zero when any test or package failed.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

func main() {
	var passed, failed, skipped int
	pkgFailed := false
	outputs := map[string][]string{} // test output, kept until the test ends
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Println(sc.Text()) // build errors and the like come as plain text
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			if e.Test == "" {
				if strings.HasPrefix(e.Output, "ok ") || strings.HasPrefix(e.Output, "FAIL") ||
					strings.HasPrefix(e.Output, "---") || strings.Contains(e.Output, "[build failed]") ||
					strings.HasPrefix(e.Output, "panic:") || strings.HasPrefix(e.Output, "#") {
					fmt.Print(e.Output)
				}
				continue
			}
			outputs[key] = append(outputs[key], e.Output)
		case "pass":
			if e.Test != "" {
				passed++
			}
			delete(outputs, key)
		case "skip":
			if e.Test != "" {
				skipped++
			}
			delete(outputs, key)
		case "fail":
			if e.Test == "" {
				pkgFailed = true
				continue
			}
			failed++
			fmt.Print(strings.Join(outputs[key], ""))
			delete(outputs, key)
		}
	}
	fmt.Printf("tests: %d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 || pkgFailed {
		os.Exit(1)
	}
}
