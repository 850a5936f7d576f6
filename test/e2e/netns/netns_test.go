package netns

import (
	"context"
	"net"
	"testing"
	"time"
)

// TestNeighboursResolveAcrossTheBridge checks the harness itself: a host
// holding an address answers ARP and neighbour solicitations for it
// (the kernel does), a client on the same bridge resolves it to that
// host's MAC, an address nobody holds stays unresolved, and Forward relays
// a connection made inside a namespace to the test's loopback.
func TestNeighboursResolveAcrossTheBridge(t *testing.T) {
	lan := Require(t)
	server, err := lan.AddHost("srv", "10.77.0.2/24", "fd77::2/64")
	if err != nil {
		t.Fatal(err)
	}
	client, err := lan.AddHost("cli", "10.77.0.3/24", "fd77::3/64")
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"10.77.0.2", "fd77::2"} {
		if got := resolve(t, client, addr, 5*time.Second); got != server.MAC.String() {
			t.Errorf("%s resolved to %q, want the server's %s", addr, got, server.MAC)
		}
	}
	for _, addr := range []string{"10.77.0.9", "fd77::9"} {
		if got := resolve(t, client, addr, 2*time.Second); got != "" {
			t.Errorf("%s, held by nobody, resolved to %q", addr, got)
		}
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	go func() {
		if c, err := l.Accept(); err == nil {
			_, _ = c.Write([]byte("hello"))
			_ = c.Close()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := client.Forward(ctx, l.Addr().String()); err != nil {
		t.Fatal(err)
	}
	var got []byte
	err = client.in(func() error {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		got = make([]byte, 5)
		_, err = c.Read(got)
		return err
	})
	if err != nil || string(got) != "hello" {
		t.Errorf("through Forward: %q, %v", got, err)
	}
}

// resolve pokes addr from h every 200ms until its kernel has a link-layer
// address for it or timeout passes, and returns that address ("" if none).
func resolve(t *testing.T, h *Host, addr string, timeout time.Duration) string {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; {
		if err := h.Poke(addr); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		mac, err := h.Neighbour(addr)
		if err != nil {
			t.Fatal(err)
		}
		if mac != "" || time.Now().After(deadline) {
			return mac
		}
	}
}
