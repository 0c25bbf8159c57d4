// Command testsummary reads `go test -json` on stdin, prints the ordinary
// test output (package results, and the full output of failing tests), and
// ends with one plain closing line: "tests: N passed, N failed, N skipped".
// A failing test's output often ends in the server logs the test rig dumps
// at cleanup, hundreds of lines after the failure itself; so just before
// the closing line comes a digest: each failed test with the last lines it
// printed before those dumps. It exits non-zero when any test or package
// failed.
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
	var digest []string
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
			digest = append(digest, failureDigest(e.Package, e.Test, outputs[key])...)
			delete(outputs, key)
		}
	}
	if len(digest) > 0 {
		fmt.Println("--- failures, the lines before the server logs:")
		fmt.Print(strings.Join(digest, ""))
	}
	fmt.Printf("tests: %d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 || pkgFailed {
		os.Exit(1)
	}
}

// digestLines is how many lines of a failed test's own output the digest
// repeats, and digestWidth how long each may be.
const (
	digestLines = 12
	digestWidth = 400
)

// failureDigest is a failed test's name and the last lines of its output
// before the test rig's first dump of kept server logs ("kept server dir"),
// which comes at cleanup, after the failure was reported.
func failureDigest(pkg, test string, out []string) []string {
	var lines []string
	for _, chunk := range out {
		for _, l := range strings.SplitAfter(chunk, "\n") {
			if l != "" {
				lines = append(lines, l)
			}
		}
	}
	end := len(lines)
	for i, l := range lines {
		if strings.Contains(l, "kept server dir ") {
			end = i
			break
		}
	}
	from := max(0, end-digestLines)
	digest := []string{fmt.Sprintf("%s (%s):\n", test, pkg)}
	for _, l := range lines[from:end] {
		if len(l) > digestWidth {
			l = l[:digestWidth] + " ...\n"
		}
		if !strings.HasSuffix(l, "\n") {
			l += "\n"
		}
		digest = append(digest, l)
	}
	return digest
}
