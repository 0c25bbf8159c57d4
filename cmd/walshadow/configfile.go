package main

import (
	"fmt"
	"os"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/config"
)

// pipelineSession is the walshadow resource of a pipeline config.
type pipelineSession struct {
	Label     string
	SourceDSN string
	StateDir  string
	SlotName  string
	// The spool's settings (release_slot, max_bytes).
	SpoolRelease  string
	SpoolMaxBytes int64
}

// readPipelineSession reads the walshadow resource of the pipeline config
// at path, with benthos' ${ENV} and ${ENV:default} interpolation and the
// resource's field defaults (slot.name is "walshadow" unless set). A
// variable that is not set reads as empty, as `walshadow lint` would
// report it; a config with several walshadow resources must say which with
// label.
func readPipelineSession(path, label string) (pipelineSession, error) {
	var s pipelineSession
	b, err := os.ReadFile(path)
	if err != nil {
		return s, fmt.Errorf("reading the pipeline config: %w", err)
	}
	q := service.GlobalEnvironment().FullConfigSchema(Version, DateBuilt).NewConfigQuerier()
	file, err := q.ParseYAML(string(b))
	if err != nil {
		return s, fmt.Errorf("parsing %s: %w", path, err)
	}
	res, err := file.FieldAtPath(config.ResourceType)
	if err != nil {
		return s, fmt.Errorf("%s has no %s resource: %w", path, config.ResourceType, err)
	}
	list, err := res.FieldObjectList()
	if err != nil {
		return s, fmt.Errorf("%s: %s: %w", path, config.ResourceType, err)
	}
	var labels []string
	for _, r := range list {
		l, _ := r.FieldString("label")
		labels = append(labels, l)
		if label != "" && l != label || label == "" && len(list) > 1 {
			continue
		}
		s.Label = l
		fields := []struct {
			dst  *string
			path []string
		}{
			{&s.SourceDSN, []string{config.FieldSourceDSN}},
			{&s.StateDir, []string{config.FieldStateDir}},
			{&s.SlotName, []string{config.FieldSlot, config.FieldSlotName}},
			{&s.SpoolRelease, []string{config.FieldSpool, config.FieldSpoolRelease}},
		}
		for _, f := range fields {
			if *f.dst, err = r.FieldString(f.path...); err != nil {
				return s, fmt.Errorf("%s: %s resource %q: %w", path, config.ResourceType, l, err)
			}
		}
		n, err := r.FieldInt(config.FieldSpool, config.FieldSpoolMaxBytes)
		if err != nil {
			return s, fmt.Errorf("%s: %s resource %q: %w", path, config.ResourceType, l, err)
		}
		s.SpoolMaxBytes = int64(n)
		return s, nil
	}
	switch {
	case len(list) == 0:
		return s, fmt.Errorf("%s has no %s resource", path, config.ResourceType)
	case label == "":
		return s, fmt.Errorf("%s has %d %s resources (%q): name one with --%s", path, len(list), config.ResourceType, labels, flagLabel)
	default:
		return s, fmt.Errorf("%s has no %s resource labelled %q (it has %q)", path, config.ResourceType, label, labels)
	}
}
