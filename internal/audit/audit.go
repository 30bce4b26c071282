// Package audit writes audit.k8s.io/v1 Events for the requests informerd
// answers from its cache, which kube-apiserver's own audit log never sees.
//
// Everything here is k8s.io/apiserver's code, assembled as kube-apiserver's
// --audit-* flags assemble it (k8s.io/apiserver/pkg/server/options, not
// imported: it pulls in etcd's client): the policy evaluator, the log
// backend, its blocking, blocking-strict or batch wrapper, the optional
// truncation and lumberjack's rotation. So a policy file that works for
// kube-apiserver works here, and the log lines are the ones kube-apiserver
// writes. The HTTP chain attaches them with
// k8s.io/apiserver/pkg/endpoints/filters.WithAuditInit and WithAudit,
// passing Sink and Policy.
package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"gopkg.in/natefinch/lumberjack.v2"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	apiaudit "k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/audit/policy"
	pluginbuffered "k8s.io/apiserver/plugin/pkg/audit/buffered"
	pluginlog "k8s.io/apiserver/plugin/pkg/audit/log"
	plugintruncate "k8s.io/apiserver/plugin/pkg/audit/truncate"
)

// ErrClosed is the write error of an event that arrives after Run
// returned; the backend logs it and counts it in apiserver_audit_error_total.
var ErrClosed = errors.New("audit: log closed")

// Auditor is the audit policy and the backend that writes the log.
//
// Sink and Policy may be used by any number of requests at once, as soon
// as New returns (in batch mode events wait in the buffer until Run
// starts) and until Run returns; events after that are lost. Run must be
// called once: it alone closes the file.
type Auditor struct {
	policy  apiaudit.PolicyRuleEvaluator
	backend apiaudit.Backend
	out     *logWriter
}

// New builds the backend and the policy evaluator from o after checking o
// as Validate does. It creates the log file (mode 0600, and its folder,
// 0700) when it is missing. It returns nil, nil when o is not Enabled.
func New(o Options) (*Auditor, error) {
	p, err := o.validate()
	if err != nil || p == nil {
		return nil, err
	}
	out, err := openLog(o)
	if err != nil {
		return nil, err
	}
	return &Auditor{
		policy:  policy.NewPolicyRuleEvaluator(p),
		backend: newBackend(o, out),
		out:     out,
	}, nil
}

// newBackend wraps the log backend as kube-apiserver's AuditLogOptions
// does: first the mode, then truncation.
func newBackend(o Options, out io.Writer) apiaudit.Backend {
	gv := auditv1.SchemeGroupVersion
	b := pluginlog.NewBackend(out, o.Format, gv)
	switch o.Mode {
	case ModeBlockingStrict:
	case ModeBlocking:
		b = ignoreErrors{b}
	default:
		b = pluginbuffered.NewBackend(b, logBatchConfig())
	}
	if o.Truncate {
		b = plugintruncate.NewBackend(b, plugintruncate.Config{
			MaxEventSize: o.TruncateMaxEventSize,
			MaxBatchSize: o.TruncateMaxBatchSize,
		}, gv)
	}
	return b
}

// logBatchConfig is kube-apiserver's batch configuration of the log
// backend (its defaultLogBatchConfig): a buffer of 10000 events, each
// written on its own, synchronously.
func logBatchConfig() pluginbuffered.BatchConfig {
	return pluginbuffered.BatchConfig{BufferSize: 10000, MaxBatchSize: 1}
}

// ignoreErrors is kube-apiserver's blocking mode: a failed write is
// logged and counted by the log backend, and the request goes on.
type ignoreErrors struct{ apiaudit.Backend }

var _ apiaudit.Backend = ignoreErrors{}

func (b ignoreErrors) ProcessEvents(ev ...*auditinternal.Event) bool {
	b.Backend.ProcessEvents(ev...)
	return true
}

func (b ignoreErrors) String() string { return fmt.Sprintf("ignoreErrors<%s>", b.Backend) }

// Sink receives the events of the requests WithAudit sees.
func (a *Auditor) Sink() apiaudit.Sink { return a.backend }

// Policy tells WithAudit at which level to audit a request, from the
// policy file.
func (a *Auditor) Policy() apiaudit.PolicyRuleEvaluator { return a.policy }

// Run runs the backend until ctx ends, then writes what is still queued
// (batch mode), closes the log file and returns. One goroutine outlives
// it: lumberjack's, which removes and compresses rotated files; lumberjack
// starts it at the first write when rotation is on (MaxSize > 0) and has
// no way to stop it, in kube-apiserver too.
func (a *Auditor) Run(ctx context.Context) error {
	stop := make(chan struct{})
	runErr := a.backend.Run(stop)
	if runErr == nil {
		<-ctx.Done()
	}
	close(stop)
	a.backend.Shutdown()
	if err := a.out.Close(); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("audit: close log: %w", err))
	}
	if runErr != nil {
		return fmt.Errorf("audit: run %s backend: %w", a.backend, runErr)
	}
	return nil
}

// openLog returns the log's writer as kube-apiserver's getWriter does:
// standard output for "-", else the file, made first with mode 0600, then
// opened for appending, behind lumberjack when MaxSize is set.
func openLog(o Options) (*logWriter, error) {
	if o.LogPath == "-" {
		return &logWriter{w: os.Stdout}, nil
	}
	if err := ensureLogFile(o.LogPath); err != nil {
		return nil, fmt.Errorf("audit: create --audit-log-path: %w", err)
	}
	if o.MaxSize == 0 {
		f, err := os.OpenFile(o.LogPath, os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, fmt.Errorf("audit: open --audit-log-path: %w", err)
		}
		return &logWriter{w: f, c: f}, nil
	}
	l := &lumberjack.Logger{
		Filename:   o.LogPath,
		MaxAge:     o.MaxAge,
		MaxBackups: o.MaxBackups,
		MaxSize:    o.MaxSize,
		Compress:   o.Compress,
	}
	return &logWriter{w: l, c: l}, nil
}

// ensureLogFile makes the log's folder (0700) and the file (0600) unless
// they exist: audit events name users and resources.
func ensureLogFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

// logWriter is the log's writer that refuses writes once closed: without
// it lumberjack would open the file again for a late event, and nobody
// would close it. Write may be called concurrently; the writer underneath
// orders the writes (one per event).
type logWriter struct {
	w io.Writer
	c io.Closer // nil for standard output

	mu     sync.RWMutex
	closed bool
}

func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, ErrClosed
	}
	return l.w.Write(p)
}

// Close closes the file after the writes under way.
func (l *logWriter) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.c == nil {
		l.closed = true
		return nil
	}
	l.closed = true
	return l.c.Close()
}
