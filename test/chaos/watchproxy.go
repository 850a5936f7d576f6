package chaos

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// watchProxy stands between one replica and kube-apiserver: a reverse
// proxy terminating TLS with kube-apiserver's own serving certificate
// (which the replica's kubeconfig trusts) and passing every request on
// with its bearer token. It leaves requests alone but for the responses of
// watches (watch=true), whose bytes it can hold back for a while (the
// replica's view of the cluster goes stale: Sieve's stale states) or cut
// mid-way (the replica's informers re-watch, or re-list, and may never see
// the states in between: unobserved states).
type watchProxy struct {
	URL string
	srv *http.Server

	mu sync.Mutex
	// holdUntil: watch bytes read from kube-apiserver before then reach
	// the replica only then.
	holdUntil time.Time
	watches   map[*watchBody]struct{}
	closed    bool
}

// startWatchProxy starts a proxy in front of cp's kube-apiserver.
func startWatchProxy(cp *framework.ControlPlane) (*watchProxy, error) {
	target, err := url.Parse(cp.URL)
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(cp.CAFile)
	if err != nil {
		return nil, fmt.Errorf("watch proxy: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("watch proxy: no certificate in " + cp.CAFile)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(cp.Dir, "apiserver.crt"), filepath.Join(cp.Dir, "apiserver.key"))
	if err != nil {
		return nil, fmt.Errorf("watch proxy: %w", err)
	}
	p := &watchProxy{watches: map[*watchBody]struct{}{}}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second,
	}
	rp.FlushInterval = -1 // a watch's events as they come
	rp.ErrorLog = log.New(io.Discard, "", 0)
	rp.ModifyResponse = func(resp *http.Response) error {
		if q := resp.Request.URL.Query().Get("watch"); q == "true" || q == "1" {
			resp.Body = p.track(resp.Body)
		}
		return nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("watch proxy: %w", err)
	}
	p.URL = "https://" + ln.Addr().String()
	p.srv = &http.Server{
		Handler:           rp,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() { _ = p.srv.ServeTLS(ln, "", "") }()
	return p, nil
}

// kubeconfig writes a copy of cp's admin kubeconfig that reaches
// kube-apiserver through the proxy, and returns its path.
func (p *watchProxy) kubeconfig(cp *framework.ControlPlane, path string) (string, error) {
	data, err := os.ReadFile(cp.AdminKubeconfig)
	if err != nil {
		return "", err
	}
	if !strings.Contains(string(data), cp.URL) {
		return "", fmt.Errorf("watch proxy: %s does not name %s", cp.AdminKubeconfig, cp.URL)
	}
	return path, os.WriteFile(path, []byte(strings.ReplaceAll(string(data), cp.URL, p.URL)), 0o600) //nolint:gosec // A path under the run's own directory.
}

// hold holds back the watch events kube-apiserver sends for d.
func (p *watchProxy) hold(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdUntil = time.Now().Add(d)
}

// drop cuts every watch in progress mid-way; it returns how many.
func (p *watchProxy) drop() int {
	p.mu.Lock()
	bodies := make([]*watchBody, 0, len(p.watches))
	for b := range p.watches {
		bodies = append(bodies, b)
	}
	p.mu.Unlock()
	for _, b := range bodies {
		_ = b.Close()
	}
	return len(bodies)
}

// wait blocks while watch bytes are held back.
func (p *watchProxy) wait() {
	for {
		p.mu.Lock()
		d := time.Until(p.holdUntil)
		if p.closed {
			d = 0
		}
		p.mu.Unlock()
		if d <= 0 {
			return
		}
		time.Sleep(min(d, 200*time.Millisecond))
	}
}

func (p *watchProxy) track(body io.ReadCloser) io.ReadCloser {
	b := &watchBody{ReadCloser: body, p: p}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watches[b] = struct{}{}
	return b
}

func (p *watchProxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.drop()
	_ = p.srv.Close()
}

// watchBody is a watch's response body on its way through the proxy.
type watchBody struct {
	io.ReadCloser
	p    *watchProxy
	once sync.Once
}

func (b *watchBody) Read(buf []byte) (int, error) {
	n, err := b.ReadCloser.Read(buf)
	b.p.wait()
	return n, err
}

func (b *watchBody) Close() error {
	var err error
	b.once.Do(func() {
		b.p.mu.Lock()
		delete(b.p.watches, b)
		b.p.mu.Unlock()
		err = b.ReadCloser.Close()
	})
	return err
}
