package audit

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit/policy"
	pluginlog "k8s.io/apiserver/plugin/pkg/audit/log"
)

// Modes of the log backend (--audit-log-mode), as kube-apiserver's.
const (
	// ModeBlocking writes each event before the request goes on; a failed
	// write is logged and counted, and the request is served.
	ModeBlocking = "blocking"
	// ModeBlockingStrict is ModeBlocking, except that a request whose
	// first event cannot be written fails with 500.
	ModeBlockingStrict = "blocking-strict"
	// ModeBatch queues events in a bounded buffer that a goroutine of Run
	// writes; an event that finds the buffer full is dropped and counted.
	ModeBatch = "batch"
)

// modes are the values --audit-log-mode takes, in kube-apiserver's order.
var modes = []string{ModeBatch, ModeBlocking, ModeBlockingStrict}

// Options are the audit flags, named and defaulted as kube-apiserver's
// (k8s.io/apiserver/pkg/server/options.AuditOptions) for its log backend,
// informerd's only one. NewOptions returns the defaults.
type Options struct {
	// PolicyFile is the audit.k8s.io/v1 Policy that selects the requests
	// to log and at which level (--audit-policy-file).
	PolicyFile string
	// LogPath is the log file (--audit-log-path); "-" is standard output.
	LogPath string
	// MaxAge is how many days a rotated file is kept (--audit-log-maxage),
	// MaxBackups how many rotated files are kept (--audit-log-maxbackup)
	// and MaxSize the size in megabytes at which the file is rotated
	// (--audit-log-maxsize). 0 means no limit; MaxSize 0 turns rotation off.
	MaxAge, MaxBackups, MaxSize int
	// Compress gzips the rotated files (--audit-log-compress).
	Compress bool
	// Format is json (one audit.k8s.io/v1 Event per line) or legacy
	// (--audit-log-format).
	Format string
	// Mode is ModeBlocking, ModeBlockingStrict or ModeBatch
	// (--audit-log-mode).
	Mode string
	// Truncate shrinks events larger than TruncateMaxEventSize bytes by
	// dropping their request and response objects, and drops them when
	// that is not enough (--audit-log-truncate-enabled,
	// --audit-log-truncate-max-event-size); batches are split at
	// TruncateMaxBatchSize bytes (--audit-log-truncate-max-batch-size).
	Truncate                                   bool
	TruncateMaxEventSize, TruncateMaxBatchSize int64
}

// NewOptions returns kube-apiserver's defaults: audit off until both
// --audit-policy-file and --audit-log-path are given; then JSON lines,
// blocking, rotated at 100 MB, 100 rotated files kept for up to 366 days.
func NewOptions() Options {
	return Options{
		MaxAge:               366,
		MaxBackups:           100,
		MaxSize:              100,
		Format:               pluginlog.FormatJson,
		Mode:                 ModeBlocking,
		TruncateMaxEventSize: 100 * 1024,       // 100KB
		TruncateMaxBatchSize: 10 * 1024 * 1024, // 10MB
	}
}

// AddFlags registers the audit flags on fs, each with o's current value as
// its default.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.PolicyFile, "audit-policy-file", o.PolicyFile, "audit the requests informerd answers itself, which kube-apiserver never sees, as this audit.k8s.io/v1 Policy file (kube-apiserver's format) selects; requires --audit-log-path")
	fs.StringVar(&o.LogPath, "audit-log-path", o.LogPath, "write the audit events of --audit-policy-file to this file, as kube-apiserver's audit log; '-' means standard out")
	fs.IntVar(&o.MaxAge, "audit-log-maxage", o.MaxAge, "the maximum number of days to retain old audit log files based on the timestamp encoded in their filename; 0: old files are not removed based on age")
	fs.IntVar(&o.MaxBackups, "audit-log-maxbackup", o.MaxBackups, "the maximum number of old audit log files to retain; 0: no restriction on the number of files")
	fs.IntVar(&o.MaxSize, "audit-log-maxsize", o.MaxSize, "the maximum size in megabytes of the audit log file before it gets rotated; 0 disables rotation (not recommended)")
	fs.BoolVar(&o.Compress, "audit-log-compress", o.Compress, "compress the rotated audit log files with gzip")
	fs.StringVar(&o.Format, "audit-log-format", o.Format, "format of saved audit events: json (one audit.k8s.io/v1 Event per line) or legacy (one line of text per event)")
	fs.StringVar(&o.Mode, "audit-log-mode", o.Mode, "strategy for writing audit events: blocking (the response waits for the write), blocking-strict (also fails a request whose first event cannot be written) or batch (a bounded buffer written in the background)")
	fs.BoolVar(&o.Truncate, "audit-log-truncate-enabled", o.Truncate, "truncate audit events larger than --audit-log-truncate-max-event-size")
	fs.Int64Var(&o.TruncateMaxEventSize, "audit-log-truncate-max-event-size", o.TruncateMaxEventSize, "maximum size in bytes of an audit event; a larger one loses its request and response objects, and is discarded if that is not enough")
	fs.Int64Var(&o.TruncateMaxBatchSize, "audit-log-truncate-max-batch-size", o.TruncateMaxBatchSize, "maximum size in bytes of a batch of audit events; a larger one is split")
}

// Enabled reports whether requests are audited: both a policy and a log
// are given.
func (o Options) Enabled() bool { return o.PolicyFile != "" && o.LogPath != "" }

// Validate checks the flags and loads the policy file, so that a mistake
// fails at start, naming the flag. New runs it too.
func (o Options) Validate() error {
	_, err := o.validate()
	return err
}

// validate checks o and returns the loaded policy, nil when auditing is
// off.
func (o Options) validate() (*auditinternal.Policy, error) {
	if !slices.Contains(pluginlog.AllowedFormats, o.Format) {
		return nil, fmt.Errorf("--audit-log-format must be one of %s, got %q", strings.Join(pluginlog.AllowedFormats, ", "), o.Format)
	}
	if !slices.Contains(modes, o.Mode) {
		return nil, fmt.Errorf("--audit-log-mode must be one of %s, got %q", strings.Join(modes, ", "), o.Mode)
	}
	for _, f := range []struct {
		name  string
		value int
	}{
		{"--audit-log-maxage", o.MaxAge},
		{"--audit-log-maxbackup", o.MaxBackups},
		{"--audit-log-maxsize", o.MaxSize},
	} {
		if f.value < 0 {
			return nil, fmt.Errorf("%s must not be negative, got %d (0: no limit)", f.name, f.value)
		}
	}
	if o.Truncate {
		if o.TruncateMaxEventSize <= 0 {
			return nil, fmt.Errorf("--audit-log-truncate-max-event-size must be positive, got %d", o.TruncateMaxEventSize)
		}
		if o.TruncateMaxBatchSize < o.TruncateMaxEventSize {
			return nil, fmt.Errorf("--audit-log-truncate-max-batch-size %d must be at least --audit-log-truncate-max-event-size %d", o.TruncateMaxBatchSize, o.TruncateMaxEventSize)
		}
	}
	switch {
	case o.PolicyFile != "" && o.LogPath == "":
		return nil, errors.New("--audit-policy-file needs --audit-log-path: informerd writes audit events only to a log file")
	case o.PolicyFile == "" && o.LogPath != "":
		return nil, errors.New("--audit-log-path needs --audit-policy-file: without a policy no request is audited")
	case !o.Enabled():
		return nil, nil
	}
	return loadPolicy(o.PolicyFile)
}

// loadPolicy reads and checks a Policy file as kube-apiserver does: strict
// decoding first, a lenient one (with a warning in the log) when only
// unknown or duplicate fields stood in the way; a known apiVersion, valid
// rules and at least one rule.
func loadPolicy(path string) (*auditinternal.Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--audit-policy-file: %w", err)
	}
	p, err := policy.LoadPolicyFromBytes(b)
	if err != nil {
		return nil, fmt.Errorf("--audit-policy-file %s: %w", path, err)
	}
	return p, nil
}
