package memlimit_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/informerd/informerd/internal/memlimit"
)

// Mount tables: a cgroup v2 host or container, and a hybrid v1 host (v2
// mounted too, without the memory controller) as systemd sets it up.
const (
	mountsV2 = `24 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
30 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`
	mountsV1 = `30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	// A container without a cgroup namespace: the mount shows only the
	// container's own cgroup as its root.
	mountsV1Container = `34 30 0:31 /kubepods/pod1/c1 /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory
`
)

// tree writes files (path under root: content) and returns root.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestChoose(t *testing.T) {
	const gib = 1 << 30
	v2 := func(limits map[string]string) map[string]string {
		files := map[string]string{"proc/self/cgroup": "0::/kubepods/pod1/c1\n", "proc/self/mountinfo": mountsV2}
		for dir, v := range limits {
			files[filepath.Join("sys/fs/cgroup", dir, "memory.max")] = v
		}
		return files
	}
	v1 := map[string]string{
		"proc/self/cgroup":                                            "12:cpu,cpuacct:/\n4:memory:/process_api/8a30\n0::/\n",
		"proc/self/mountinfo":                                         mountsV1,
		"sys/fs/cgroup/memory/memory.limit_in_bytes":                  "9223372036854771712\n",
		"sys/fs/cgroup/memory/process_api/8a30/memory.limit_in_bytes": "2147483648\n",
	}
	tests := []struct {
		name       string
		files      map[string]string
		ratio      float64
		gomemlimit string
		want       memlimit.Limit
		wantErr    string
	}{
		{
			name:  "v2, a number",
			files: v2(map[string]string{"kubepods/pod1/c1": "2147483648\n", "kubepods/pod1": "max\n", "kubepods": "max\n"}),
			ratio: 0.9,
			want:  memlimit.Limit{Bytes: 1932735283, Cgroup: 2 * gib, File: "/sys/fs/cgroup/kubepods/pod1/c1/memory.max", Source: "cgroup v2"},
		},
		{
			name:  "v2, max everywhere",
			files: v2(map[string]string{"kubepods/pod1/c1": "max\n", "kubepods/pod1": "max\n"}),
			ratio: 0.9,
			want:  memlimit.Limit{Source: "none (the cgroup sets no memory limit)"},
		},
		{
			name:  "v2, max on the container, a number on the pod",
			files: v2(map[string]string{"kubepods/pod1/c1": "max\n", "kubepods/pod1": "1073741824\n", "kubepods": "4294967296\n"}),
			ratio: 0.5,
			want:  memlimit.Limit{Bytes: gib / 2, Cgroup: gib, File: "/sys/fs/cgroup/kubepods/pod1/memory.max", Source: "cgroup v2"},
		},
		{
			name:  "v2 in a cgroup namespace",
			files: map[string]string{"proc/self/cgroup": "0::/\n", "proc/self/mountinfo": mountsV2, "sys/fs/cgroup/memory.max": "536870912\n"},
			ratio: 1,
			want:  memlimit.Limit{Bytes: gib / 2, Cgroup: gib / 2, File: "/sys/fs/cgroup/memory.max", Source: "cgroup v2"},
		},
		{
			name:  "v1, a number under an unlimited root",
			files: v1,
			ratio: 0.9,
			want:  memlimit.Limit{Bytes: 1932735283, Cgroup: 2 * gib, File: "/sys/fs/cgroup/memory/process_api/8a30/memory.limit_in_bytes", Source: "cgroup v1"},
		},
		{
			name: "v1 in a container: the mount's root is the container's cgroup",
			files: map[string]string{
				"proc/self/cgroup":                           "4:memory:/kubepods/pod1/c1\n",
				"proc/self/mountinfo":                        mountsV1Container,
				"sys/fs/cgroup/memory/memory.limit_in_bytes": "268435456\n",
			},
			ratio: 0.9,
			want:  memlimit.Limit{Bytes: 241591910, Cgroup: gib / 4, File: "/sys/fs/cgroup/memory/memory.limit_in_bytes", Source: "cgroup v1"},
		},
		{
			name: "v1, unlimited",
			files: map[string]string{
				"proc/self/cgroup":                           "4:memory:/\n",
				"proc/self/mountinfo":                        mountsV1,
				"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
			},
			ratio: 0.9,
			want:  memlimit.Limit{Source: "none (the cgroup sets no memory limit)"},
		},
		{
			name:  "no cgroup files",
			files: map[string]string{"proc/self/cgroup": "0::/\n", "proc/self/mountinfo": mountsV2},
			ratio: 0.9,
			want:  memlimit.Limit{Source: "none (the cgroup sets no memory limit)"},
		},
		{
			name:  "no /proc",
			files: map[string]string{},
			ratio: 0.9,
			want:  memlimit.Limit{Source: "none"}, wantErr: "no such file",
		},
		{
			name:  "garbage in memory.max",
			files: v2(map[string]string{"kubepods/pod1/c1": "lots\n"}),
			ratio: 0.9,
			want:  memlimit.Limit{Source: "none"}, wantErr: `"lots" is not a memory limit`,
		},
		{
			name:       "GOMEMLIMIT set by the user wins",
			files:      v1,
			ratio:      0.9,
			gomemlimit: "500MiB",
			want:       memlimit.Limit{Source: "GOMEMLIMIT"},
		},
		{
			name:  "ratio 0 is off",
			files: v1,
			ratio: 0,
			want:  memlimit.Limit{Source: "off (--memory-limit-ratio=0)"},
		},
		{
			name:    "ratio above 1",
			files:   v1,
			ratio:   1.5,
			wantErr: "want a share of the cgroup's limit from 0 (off) to 1",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := memlimit.Choose(tree(t, tc.files), tc.ratio, tc.gomemlimit)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Choose: error %v, want one containing %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Choose (-want +got):\n%s", diff)
			}
		})
	}
}
