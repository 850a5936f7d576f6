// Package netns builds small layer-2 networks out of Linux network
// namespaces for end-to-end tests that must see packets: a "LAN" namespace
// holding a bridge, and hosts (each its own namespace) plugged into it by
// veth pairs. Nothing touches the machine's own network namespace: every
// link is created inside a namespace the test made, and Close deletes them
// all. Tests reach the API server (on the host's loopback) from inside a
// host through Forward, a proxy listening in that host's namespace.
package netns

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// LAN is a bridge in its own namespace, and the hosts plugged into it.
type LAN struct {
	prefix string
	ns     string
	mu     sync.Mutex
	hosts  []*Host
	closed bool
}

// Host is a namespace with one interface, eth0, on a LAN.
type Host struct {
	// NS is the namespace's name (for `ip netns exec`).
	NS string
	// MAC is eth0's hardware address.
	MAC net.HardwareAddr
}

// Require returns a new LAN, or skips the test (fails it with CI set) when
// this process cannot create network namespaces (not root, no `ip`).
func Require(t *testing.T) *LAN {
	t.Helper()
	lan, err := NewLAN()
	if err != nil {
		msg := fmt.Sprintf("network namespaces unavailable (the wire tests need root and iproute2): %v", err)
		if framework.InCI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if err := lan.Close(); err != nil {
			t.Errorf("remove network namespaces: %v", err)
		}
	})
	return lan
}

// NewLAN creates a namespace holding bridge br0, up, with multicast
// snooping off so that neighbour solicitations reach every port.
func NewLAN() (*LAN, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("not root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, err
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	lan := &LAN{prefix: "mccm" + hex.EncodeToString(b)}
	lan.ns = lan.prefix + "-lan"
	if err := ip("netns", "add", lan.ns); err != nil {
		return nil, err
	}
	err := ipIn(lan.ns, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
	if err == nil {
		err = ipIn(lan.ns, "link", "set", "br0", "up")
	}
	if err != nil {
		_ = lan.Close()
		return nil, err
	}
	return lan, nil
}

// AddHost creates namespace <prefix>-<name> with lo up and eth0 plugged
// into the bridge, holding addrs (CIDR notation, IPv6 without duplicate
// address detection).
func (l *LAN) AddHost(name string, addrs ...string) (*Host, error) {
	h := &Host{NS: l.prefix + "-" + name}
	if err := ip("netns", "add", h.NS); err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.hosts = append(l.hosts, h)
	port := fmt.Sprintf("p%d", len(l.hosts))
	l.mu.Unlock()
	steps := [][]string{
		{l.ns, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", h.NS},
		{l.ns, "link", "set", port, "master", "br0", "up"},
		{h.NS, "link", "set", "lo", "up"},
		{h.NS, "link", "set", "eth0", "up"},
	}
	for _, a := range addrs {
		args := []string{h.NS, "addr", "add", a, "dev", "eth0"}
		if strings.Contains(a, ":") {
			args = append(args, "nodad")
		}
		steps = append(steps, args)
	}
	for _, s := range steps {
		if err := ipIn(s[0], s[1:]...); err != nil {
			return nil, err
		}
	}
	out, err := output("ip", "-n", h.NS, "-o", "link", "show", "eth0")
	if err != nil {
		return nil, err
	}
	m := regexp.MustCompile(`link/ether ([0-9a-f:]{17})`).FindStringSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("no MAC address in %q", out)
	}
	h.MAC, err = net.ParseMAC(m[1])
	return h, err
}

// Close deletes every namespace of the LAN (their links go with them).
func (l *LAN) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	var errs []error
	for _, h := range l.hosts {
		errs = append(errs, ip("netns", "delete", h.NS))
	}
	errs = append(errs, ip("netns", "delete", l.ns))
	return errors.Join(errs...)
}

// Command returns a command running path with args inside the host's
// namespace (`ip netns exec`, which then execs path: the PID is path's).
func (h *Host) Command(path string, args ...string) (string, []string) {
	return "ip", append([]string{"netns", "exec", h.NS, path}, args...)
}

// Run runs path with args inside the host's namespace and returns its
// standard output.
func (h *Host) Run(path string, args ...string) (string, error) {
	name, all := h.Command(path, args...)
	return output(name, all...)
}

// Neighbour returns the link-layer address the host's kernel has resolved
// for addr on eth0, or "" when it has none (no entry, or INCOMPLETE/FAILED).
func (h *Host) Neighbour(addr string) (string, error) {
	out, err := output("ip", "-n", h.NS, "neigh", "show", "to", addr, "dev", "eth0")
	if err != nil {
		return "", err
	}
	if m := regexp.MustCompile(`lladdr ([0-9a-f:]{17})`).FindStringSubmatch(out); m != nil {
		return m[1], nil
	}
	return "", nil
}

// FlushNeighbour forgets what the host's kernel resolved for addr.
func (h *Host) FlushNeighbour(addr string) error {
	return ipIn(h.NS, "neigh", "flush", "to", addr, "dev", "eth0")
}

// Poke sends one UDP datagram to addr (port 9, discard) from inside the
// host: its kernel resolves addr first, by ARP for IPv4 and neighbour
// discovery for IPv6, which is what the test then reads with Neighbour.
func (h *Host) Poke(addr string) error {
	return h.in(func() error {
		c, err := net.Dial("udp", net.JoinHostPort(addr, "9"))
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		_, err = c.Write([]byte("multicloud-ccm"))
		return err
	})
}

// Forward listens on addr inside the host's namespace and relays every
// connection to the same address in the test's own namespace (the API
// server on loopback, say), until ctx ends.
func (h *Host) Forward(ctx context.Context, addr string) error {
	var l net.Listener
	err := h.in(func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); _ = l.Close() }()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go relay(c, addr)
		}
	}()
	return nil
}

func relay(in net.Conn, addr string) {
	defer func() { _ = in.Close() }()
	out, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer func() { _ = out.Close() }()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(out, in)
	go cp(in, out)
	<-done
	<-done
}

// in runs fn on an OS thread moved into the host's namespace, then moves
// the thread back. Sockets keep the namespace they were created in, so fn
// may return a socket that any goroutine then uses. The thread must not
// die: children started with Pdeathsig (the control plane, the CCM) are
// killed when the thread that started them exits, and Go reuses threads;
// so a thread that cannot be moved back stays locked to a goroutine that
// never ends, rather than exiting.
func (h *Host) in(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer func() { _ = home.Close() }()
		target, err := os.Open(filepath.Join("/run/netns", h.NS))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer func() { _ = target.Close() }()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", h.NS, err)
			return
		}
		errc <- fn()
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			select {} // stranded in the host's namespace: park the thread forever.
		}
		runtime.UnlockOSThread()
	}()
	return <-errc
}

func ip(args ...string) error {
	_, err := output("ip", args...)
	return err
}

func ipIn(ns string, args ...string) error {
	return ip(append([]string{"-n", ns}, args...)...)
}

func output(name string, args ...string) (string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
