package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"
)

// lintMessageForm is `walshadow lint`'s check of the change batch form's
// placement (checkMessageForm's, which `run` makes on the parsed config):
// Benthos' lint checks each component's fields, not how they are composed,
// and calls this hook before it lints. It reads the configs lint was given
// (paths, globs, dir/... walks and -c), with their ${VAR:default}
// interpolated from the environment as lint sees it, and fails naming the
// file, the processor and the remedy. Other commands pass through.
func lintMessageForm(c *cli.Context) error {
	if c.Command == nil || c.Command.Name != "lint" {
		return nil
	}
	paths, err := lintTargets(c.Args().Slice())
	if err != nil {
		return nil // benthos' lint reports paths it cannot read
	}
	if conf := c.String("config"); conf != "" {
		paths = append(paths, conf)
	}
	var problems []string
	for _, path := range paths {
		if err := messageFormErrorOfFile(path); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", path, err))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	return nil
}

// lintTargets expands lint's arguments as Benthos does: a path ending in
// "..." is every .yaml and .yml file under it, anything else a glob (or the
// path itself when it matches nothing).
func lintTargets(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		if dir, ok := strings.CutSuffix(a, "..."); ok {
			err := filepath.WalkDir(filepath.Clean(dir+"."), func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if ext := filepath.Ext(p); !d.IsDir() && (ext == ".yaml" || ext == ".yml") {
					out = append(out, p)
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			continue
		}
		matches, err := filepath.Glob(a)
		if err != nil || len(matches) == 0 {
			matches = []string{a}
		}
		out = append(out, matches...)
	}
	return out, nil
}

// messageFormErrorOfFile is messageFormError of the config in path, its
// environment references interpolated. A file that does not read or parse
// is left to Benthos' lint.
func messageFormErrorOfFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	text, err := interpolateEnv(b)
	if err != nil {
		return nil // lint names the variable
	}
	var tree map[string]any
	if yaml.Unmarshal(text, &tree) != nil {
		return nil
	}
	return messageFormError(tree)
}
