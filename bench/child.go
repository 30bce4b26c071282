package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/informerd/informerd/bench/internal/childproc"
)

// Child processes (bench/informer, bench/thin, bench/floor, bench/reader) are measured
// as processes of their own. A child prints one JSON line when it is ready
// and runs until its stdin closes.

// child is a running child process.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	report childproc.Report
	lines  chan string // stdout lines after the ready line
}

// childBins are the child binaries by name, built by the harness.
var childBins = map[string]string{}

// startChild runs a child binary (informer, thin, floor, reader) and waits for its
// ready line.
func startChild(mode string, args ...string) (*child, error) {
	cmd := exec.Command(childBins[mode], args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	line := make(chan error, 1)
	go func() {
		r := bufio.NewScanner(stdout)
		if !r.Scan() {
			line <- fmt.Errorf("%s child exited before it was ready", mode)
			return
		}
		line <- json.Unmarshal(r.Bytes(), &c.report)
		for r.Scan() {
			c.lines <- r.Text()
		}
		close(c.lines)
	}()
	select {
	case err := <-line:
		if err == nil && c.report.Error != "" {
			err = fmt.Errorf("%s child: %s", mode, c.report.Error)
		}
		if err != nil {
			c.stop()
			return nil, err
		}
	case <-time.After(10 * time.Minute):
		c.stop()
		return nil, fmt.Errorf("%s child not ready after 10 minutes", mode)
	}
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// ask writes a command line to the child and returns its answer line.
func (c *child) ask(ctx context.Context, command string) (string, error) {
	if _, err := fmt.Fprintln(c.stdin, command); err != nil {
		return "", fmt.Errorf("%s to the child: %w", command, err)
	}
	select {
	case line, ok := <-c.lines:
		if !ok {
			return "", fmt.Errorf("the child exited before it answered %s", command)
		}
		return line, nil
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(time.Minute):
		return "", fmt.Errorf("the child did not answer %s within a minute", command)
	}
}

func (c *child) stop() {
	c.stdin.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}
