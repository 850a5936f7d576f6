package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"
)

// CCMOptions configures one multicloud-ccm process.
type CCMOptions struct {
	// Name tells several CCMs apart in file names (default "ccm").
	Name string
	// CloudConfig is the content of the --cloud-config file.
	CloudConfig string
	// Kubeconfig is used for --kubeconfig and the authentication and
	// authorization kubeconfigs. Empty: the admin kubeconfig.
	Kubeconfig string
	// ExtraArgs are appended to the framework's flags; a flag given here
	// replaces the framework's value for the same flag (for example
	// --leader-elect=true or --controllers=service).
	ExtraArgs []string
	// Env is added to the CCM's environment (for env: secret references).
	Env []string
	// ReadyTimeout bounds the wait for /healthz (default 60s).
	ReadyTimeout time.Duration
	// SkipReadyWait returns right after the process starts, for tests that
	// expect it to fail at start-up.
	SkipReadyWait bool
}

// CCM is a running multicloud-ccm process.
type CCM struct {
	*Process
	// Port is the secure port serving /healthz and /metrics.
	Port int
	// URL is https://127.0.0.1:<Port>.
	URL string
	// CloudConfigPath is the --cloud-config file.
	CloudConfigPath string
	// Args are the arguments it was started with.
	Args []string

	cp   *ControlPlane
	opts CCMOptions
}

var ccmSeq atomic.Int32

// StartCCM writes opts.CloudConfig to a file and starts the CCM binary
// against this control plane with short controller periods, then waits
// until its /healthz answers ok (unless opts.SkipReadyWait).
func (cp *ControlPlane) StartCCM(ctx context.Context, opts CCMOptions) (*CCM, error) {
	if opts.Name == "" {
		opts.Name = "ccm"
	}
	dir := filepath.Join(cp.Dir, fmt.Sprintf("%s-%d", opts.Name, ccmSeq.Add(1)))
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("%s: %w", opts.Name, err)
	}
	c := &CCM{cp: cp, opts: opts, CloudConfigPath: filepath.Join(dir, "cloud-config.yaml")}
	if err := writeFile(c.CloudConfigPath, []byte(opts.CloudConfig)); err != nil {
		return nil, err
	}
	return c, c.start(ctx, dir)
}

func (c *CCM) start(ctx context.Context, dir string) error {
	port, err := FreePort()
	if err != nil {
		return fmt.Errorf("%s: %w", c.opts.Name, err)
	}
	c.Port, c.URL = port, "https://127.0.0.1:"+strconv.Itoa(port)
	c.Args = mergeFlags(c.defaultArgs(dir), c.opts.ExtraArgs)
	c.Process, err = StartProcess(ProcessOptions{
		Name: c.opts.Name, Path: c.cp.Binaries.CCM, Args: c.Args,
		Env:     append(os.Environ(), c.opts.Env...),
		LogPath: filepath.Join(dir, c.opts.Name+".log"),
	})
	if err != nil || c.opts.SkipReadyWait {
		return err
	}
	return c.WaitHealthy(ctx)
}

func (c *CCM) defaultArgs(dir string) []string {
	kc := c.opts.Kubeconfig
	if kc == "" {
		kc = c.cp.AdminKubeconfig
	}
	return []string{
		"--cloud-provider=multicloud",
		"--cloud-config=" + c.CloudConfigPath,
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.Port),
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--configure-cloud-routes=false",
		"--cluster-name=e2e",
		"--node-monitor-period=1s",
		"--node-status-update-frequency=5s",
		"--concurrent-service-syncs=4",
		"--v=2",
	}
}

// WaitHealthy polls /healthz until it answers 200.
func (c *CCM) WaitHealthy(ctx context.Context) error {
	timeout := c.opts.ReadyTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	httpc := insecureClient()
	return c.waitUntil(ctx, "/healthz", 200*time.Millisecond, func(ctx context.Context) error {
		return httpOK(ctx, httpc, c.URL+"/healthz", "")
	})
}

// Get fetches path from the CCM's secure port as the control plane's admin
// (the CCM checks the token with TokenReview and SubjectAccessReview).
func (c *CCM) Get(ctx context.Context, path string) (int, []byte, error) {
	return c.GetWithToken(ctx, path, c.cp.AdminToken)
}

// GetWithToken fetches path from the CCM's secure port with a bearer token
// ("" sends none), for checking who may read /metrics.
func (c *CCM) GetWithToken(ctx context.Context, path, token string) (int, []byte, error) {
	return httpGet(ctx, insecureClient(), c.URL+path, token)
}

// Restart stops the process and starts it again with the same
// cloud-config and flags on a new port, waiting for /healthz.
func (c *CCM) Restart(ctx context.Context) error {
	if err := c.Stop(15 * time.Second); err != nil {
		return fmt.Errorf("restart %s: %w", c.opts.Name, err)
	}
	dir := filepath.Dir(c.CloudConfigPath)
	return c.start(ctx, dir)
}

// insecureClient talks to the CCM's self-signed serving certificate.
func insecureClient() *http.Client {
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: insecureTLS()},
	}
}

func insecureTLS() *tls.Config {
	// The CCM serves a self-signed certificate it generates at start-up;
	// the client only talks to it on loopback.
	return &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // Loopback test client.
}
