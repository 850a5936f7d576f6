package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProcessOptions describes a program to run.
type ProcessOptions struct {
	// Name identifies the process in messages and names its log file.
	Name string
	// Path is the executable.
	Path string
	// Args are its arguments, without the program name.
	Args []string
	// Env is its whole environment; nil inherits the test's.
	Env []string
	// LogPath receives its standard output and standard error.
	LogPath string
}

// Process is a running program whose output goes to a log file, in its
// own process group. It is killed if the process that started it dies
// first (Pdeathsig).
type Process struct {
	opts ProcessOptions
	cmd  *exec.Cmd
	log  *os.File

	done    chan struct{}
	waitErr error
	stopped sync.Once
}

// StartProcess starts opts.Path and returns at once.
func StartProcess(opts ProcessOptions) (*Process, error) {
	log, err := os.OpenFile(opts.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600) //nolint:gosec // Log path chosen by the framework.
	if err != nil {
		return nil, fmt.Errorf("start %s: log file: %w", opts.Name, err)
	}
	cmd := exec.Command(opts.Path, opts.Args...) //nolint:gosec // The binaries come from the test configuration.
	cmd.Stdout, cmd.Stderr, cmd.Env = log, log, opts.Env
	// Own process group: a Ctrl-C at the terminal reaches the parent only,
	// which then stops its children in order. Pdeathsig kills the child if
	// the parent dies without doing so.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	fmt.Fprintf(log, "+ %s %s\n", opts.Path, strings.Join(opts.Args, " "))
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("start %s: %w", opts.Name, err)
	}
	p := &Process{opts: opts, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		_ = log.Close()
		close(p.done)
	}()
	return p, nil
}

// Name returns the process's name.
func (p *Process) Name() string { return p.opts.Name }

// LogPath returns the file holding the process's output.
func (p *Process) LogPath() string { return p.opts.LogPath }

// PID returns the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Stop sends SIGTERM, waits up to grace, then kills. It is safe to call
// more than once. A process ended by Stop is not an error.
func (p *Process) Stop(grace time.Duration) error {
	var err error
	p.stopped.Do(func() {
		if exited, werr := p.Exited(); exited {
			err = unexpectedExit(p.opts.Name, werr)
			return
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return err
}

func unexpectedExit(name string, err error) error {
	if err == nil {
		return fmt.Errorf("%s had already exited (status 0)", name)
	}
	return fmt.Errorf("%s had already exited: %w", name, err)
}

// LogTail returns the last n lines of the process's log.
func (p *Process) LogTail(n int) string { return fileTail(p.opts.LogPath, n) }

// fileTail returns the last n lines of the file at path, or a note saying
// why it cannot.
func fileTail(path string, n int) string {
	data, err := os.ReadFile(path) //nolint:gosec // Our own log files.
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = append([][]byte{[]byte(fmt.Sprintf("... (%d earlier lines in %s)", len(lines)-n, path))}, lines[len(lines)-n:]...)
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// waitUntil polls check every interval until it returns nil, ctx ends, or
// the process exits. The error names what was awaited and the last failure.
func (p *Process) waitUntil(ctx context.Context, what string, interval time.Duration, check func(context.Context) error) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last error
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %s: %w (last error: %w)\n%s", p.opts.Name, what, ctx.Err(), last, p.LogTail(30))
		case <-p.done:
			return fmt.Errorf("%s exited while waiting for %s: %w\n%s", p.opts.Name, what, p.waitErr, p.LogTail(60))
		case <-tick.C:
		}
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close() //nolint:errcheck // Closing a listener we only used for its port.
	_, port, err := net.SplitHostPort(l.Addr().String())
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	return strconv.Atoi(port)
}

// freePorts returns n distinct free ports.
func freePorts(n int) ([]int, error) {
	seen := map[int]bool{}
	var out []int
	for len(out) < n {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}

// envWithout returns the environment minus variables with any of prefixes.
func envWithout(prefixes ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		keep := true
		for _, pre := range prefixes {
			if strings.HasPrefix(kv, pre) {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

var errNotReady = errors.New("not ready")
