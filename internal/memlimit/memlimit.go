// Package memlimit chooses the Go runtime's soft memory limit (GOMEMLIMIT)
// from the memory limit of the container's cgroup, so that the garbage
// collector works harder before the kernel's OOM killer counts the
// process's resident memory against that limit. It reads cgroup v2's
// memory.max and cgroup v1's memory.limit_in_bytes, of the process's own
// cgroup and its ancestors, through /proc/self/cgroup and
// /proc/self/mountinfo; it starts nothing and sets nothing.
package memlimit

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// unlimitedV1 is the smallest value cgroup v1 reports for "no limit":
// the largest int64 rounded down to a page, 9223372036854771712 on 4 KiB
// pages. Anything at or above it is no limit.
const unlimitedV1 = math.MaxInt64 &^ (1<<16 - 1)

// Limit is the soft memory limit chosen for the Go runtime, and where it
// came from.
type Limit struct {
	// Bytes is the limit; 0 when Choose sets none.
	Bytes int64
	// Cgroup is the cgroup's memory limit it was derived from and File
	// the file that set it; 0 and "" when none.
	Cgroup int64
	File   string
	// Source says where the limit came from, for the log: "GOMEMLIMIT",
	// "cgroup v2", "cgroup v1", or why there is none.
	Source string
}

// Choose returns the soft memory limit for this process: none when the
// environment sets GOMEMLIMIT (gomemlimit, which the runtime has applied
// already) or ratio is 0; else ratio times the memory limit of the cgroup
// the process is in, read under root ("/" outside tests); none when no
// cgroup sets one. An error means the cgroup files could not be read; the
// process then runs without a limit, as Go's default.
func Choose(root string, ratio float64, gomemlimit string) (Limit, error) {
	switch {
	case gomemlimit != "":
		return Limit{Source: "GOMEMLIMIT"}, nil
	case ratio == 0:
		return Limit{Source: "off (--memory-limit-ratio=0)"}, nil
	case ratio < 0 || ratio > 1:
		return Limit{}, fmt.Errorf("memlimit: ratio %v: want a share of the cgroup's limit from 0 (off) to 1", ratio)
	}
	c, err := Cgroup(root)
	if err != nil {
		return Limit{Source: "none"}, err
	}
	if c.Bytes == 0 {
		return Limit{Source: "none (the cgroup sets no memory limit)"}, nil
	}
	return Limit{Bytes: int64(float64(c.Bytes) * ratio), Cgroup: c.Bytes, File: c.File, Source: c.Version}, nil
}

// CgroupLimit is a cgroup's memory limit.
type CgroupLimit struct {
	// Bytes is the limit; 0 when none.
	Bytes int64
	// File is the file that sets it, under root.
	File string
	// Version is "cgroup v2" or "cgroup v1".
	Version string
}

// Cgroup returns the memory limit of the cgroup this process is in, read
// under root: the lowest of its own and its ancestors' up to the
// hierarchy's mount, cgroup v2's memory.max when the unified hierarchy
// has the memory controller, else cgroup v1's memory.limit_in_bytes.
// Bytes is 0 when no cgroup sets a limit or the process is in no memory
// cgroup that is mounted.
func Cgroup(root string) (CgroupLimit, error) {
	v2Path, v1Path, err := ownCgroups(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return CgroupLimit{}, err
	}
	v2Mount, v1Mount, err := mounts(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return CgroupLimit{}, err
	}
	if v2Path != "" && v2Mount.point != "" {
		l, found, err := lowest(root, v2Mount, v2Path, "memory.max")
		if err != nil || found {
			l.Version = "cgroup v2"
			return l, err
		}
	}
	if v1Path != "" && v1Mount.point != "" {
		l, _, err := lowest(root, v1Mount, v1Path, "memory.limit_in_bytes")
		l.Version = "cgroup v1"
		return l, err
	}
	return CgroupLimit{}, nil
}

// mount is where a cgroup hierarchy is mounted: point in this mount
// namespace, showing the hierarchy from root down.
type mount struct{ root, point string }

// lowest reads file in the cgroup dir of hierarchy m and in each of its
// ancestors up to m's mount point, and returns the lowest limit. found is
// false when not even the cgroup's own file exists (the hierarchy lacks
// the controller).
func lowest(root string, m mount, cgroup, file string) (l CgroupLimit, found bool, err error) {
	// The cgroup's path below the mount's root. A cgroup outside what
	// the mount shows (another cgroup namespace's): the mount's root is
	// the nearest cgroup there is.
	rel := "/"
	if m.root == "/" {
		rel = cgroup
	} else if r, ok := strings.CutPrefix(cgroup, m.root); ok && (r == "" || r[0] == '/') {
		rel = r
	}
	dir := path.Join(m.point, rel)
	for {
		name := filepath.Join(root, dir, file)
		data, err := os.ReadFile(name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// The root cgroup has no memory.max.
		case err != nil:
			return l, found, fmt.Errorf("memlimit: read %s: %w", name, err)
		default:
			found = true
			v, err := parseLimit(strings.TrimSpace(string(data)))
			if err != nil {
				return l, found, fmt.Errorf("memlimit: %s: %w", name, err)
			}
			if v > 0 && (l.Bytes == 0 || v < l.Bytes) {
				l.Bytes, l.File = v, path.Join(dir, file)
			}
		}
		if dir == m.point || dir == "/" {
			return l, found, nil
		}
		dir = path.Dir(dir)
	}
}

// parseLimit reads a memory.max or memory.limit_in_bytes value; 0 is no
// limit.
func parseLimit(s string) (int64, error) {
	if s == "max" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%q is not a memory limit: want a number of bytes or max", s)
	case v >= unlimitedV1:
		return 0, nil
	}
	return v, nil
}

// ownCgroups reads /proc/self/cgroup: the process's cgroup in the unified
// (v2) hierarchy and in v1's memory hierarchy; "" for one it is not in.
func ownCgroups(file string) (v2, v1 string, err error) {
	f, err := os.Open(file)
	if err != nil {
		return "", "", fmt.Errorf("memlimit: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		// hierarchy-ID:controllers:path
		fields := strings.SplitN(s.Text(), ":", 3)
		if len(fields) != 3 {
			continue
		}
		switch {
		case fields[0] == "0" && fields[1] == "":
			v2 = fields[2]
		case slices.Contains(strings.Split(fields[1], ","), "memory"):
			v1 = fields[2]
		}
	}
	return v2, v1, s.Err()
}

// mounts reads /proc/self/mountinfo: where the unified (v2) hierarchy and
// v1's memory hierarchy are mounted; zero for one that is not.
func mounts(file string) (v2, v1 mount, err error) {
	f, err := os.Open(file)
	if err != nil {
		return v2, v1, fmt.Errorf("memlimit: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		// id parent major:minor root point options [optional...] - type source super-options
		before, after, ok := strings.Cut(s.Text(), " - ")
		if !ok {
			continue
		}
		pre, post := strings.Fields(before), strings.Fields(after)
		if len(pre) < 5 || len(post) < 3 {
			continue
		}
		m := mount{root: pre[3], point: pre[4]}
		switch {
		case post[0] == "cgroup2" && v2.point == "":
			v2 = m
		case post[0] == "cgroup" && v1.point == "" && slices.Contains(strings.Split(post[2], ","), "memory"):
			v1 = m
		}
	}
	return v2, v1, s.Err()
}
