package ctl

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// splitFields splits --fields into paths at the commas outside backquotes
// (a name in backquotes may hold any character but a backquote), trimming
// spaces around each path. Whether a path is well formed is informerd's to
// say.
func splitFields(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var paths []string
	quoted, start := false, 0
	add := func(end int) error {
		p := strings.TrimSpace(s[start:end])
		if p == "" {
			return fmt.Errorf("--fields %q: an empty path; write PATH[,PATH...], e.g. metadata.labels,status.podIP", s)
		}
		paths = append(paths, p)
		start = end + 1
		return nil
	}
	for i := range len(s) {
		switch {
		case s[i] == '`':
			quoted = !quoted
		case s[i] == ',' && !quoted:
			if err := add(i); err != nil {
				return nil, err
			}
		}
	}
	if quoted {
		return nil, fmt.Errorf("--fields %q: a backquote is not closed", s)
	}
	if err := add(len(s)); err != nil {
		return nil, err
	}
	return paths, nil
}

// mask is the field mask of paths: nil for whole objects.
func mask(paths []string) *fieldmaskpb.FieldMask {
	if len(paths) == 0 {
		return nil
	}
	return &fieldmaskpb.FieldMask{Paths: paths}
}
