package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// cpuSeconds returns the user+system CPU time a process has used.
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command, which is in parentheses and may hold spaces.
	rest := string(data[strings.LastIndexByte(string(data), ')')+2:])
	f := strings.Fields(rest)
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / clockTicks, nil
}

// rssBytes returns a process's resident set size.
func rssBytes(pid int) (uint64, error) { return procStatusBytes(pid, "VmRSS") }

// peakRSSBytes returns the largest resident set size a process has had
// since it started (VmHWM).
func peakRSSBytes(pid int) (uint64, error) { return procStatusBytes(pid, "VmHWM") }

// resetPeakRSS sets a process's VmHWM back to its current RSS (writing 5
// to /proc/<pid>/clear_refs, Linux 4.0 and later), so that peakRSSBytes
// reads the peak since now.
func resetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// procStatusBytes reads a "<field>: N kB" line of /proc/<pid>/status.
func procStatusBytes(pid int, field string) (uint64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s for pid %d", field, pid)
}

// cpuMeter measures the CPU seconds a set of processes use between start
// and stop.
type cpuMeter struct {
	pids  []int
	start []float64
	began time.Time
}

func meterCPU(pids ...int) *cpuMeter {
	m := &cpuMeter{pids: pids, began: time.Now()}
	for _, p := range pids {
		c, _ := cpuSeconds(p)
		m.start = append(m.start, c)
	}
	return m
}

// stop returns the CPU seconds of each process since meterCPU, and the
// wall time.
func (m *cpuMeter) stop() ([]float64, time.Duration) {
	out := make([]float64, len(m.pids))
	for i, p := range m.pids {
		c, _ := cpuSeconds(p)
		out[i] = c - m.start[i]
	}
	return out, time.Since(m.began)
}

// findProcess returns the pid of the process whose command line contains
// every one of parts.
func findProcess(parts ...string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		line := strings.ReplaceAll(string(cmd), "\x00", " ")
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no process with %q in its command line", parts)
}
