package framework

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// ControlPlaneOptions configures StartControlPlane.
type ControlPlaneOptions struct {
	// Binaries locates etcd, kube-apiserver and kubectl.
	Binaries Binaries
	// Dir is the folder for data, certificates, kubeconfigs and logs. Empty:
	// a new temporary folder.
	Dir string
	// ExtraAPIServerArgs are appended to kube-apiserver's arguments; a flag
	// given here replaces the framework's value for the same flag.
	ExtraAPIServerArgs []string
	// StartTimeout bounds the wait for etcd and kube-apiserver (default 60s).
	StartTimeout time.Duration
}

// ControlPlane is a running etcd and kube-apiserver on loopback.
type ControlPlane struct {
	// Dir holds every file of this control plane.
	Dir string
	// URL is kube-apiserver's https address.
	URL string
	// AdminToken is a static bearer token in group system:masters.
	AdminToken string
	// AdminKubeconfig is a kubeconfig file authenticating with AdminToken.
	AdminKubeconfig string
	// CAFile is the CA that signed kube-apiserver's serving certificate.
	CAFile string
	// Config is the admin client configuration.
	Config *rest.Config
	// Client is an admin clientset.
	Client kubernetes.Interface
	// Binaries are the binaries this control plane was started with.
	Binaries Binaries

	pki       *pki
	etcd      *Process
	apiserver *Process
	ownDir    bool
}

// StartControlPlane starts etcd and kube-apiserver and returns when
// kube-apiserver's /readyz answers ok. On error everything started is
// stopped again.
func StartControlPlane(ctx context.Context, opts ControlPlaneOptions) (cp *ControlPlane, err error) {
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	cp = &ControlPlane{Dir: opts.Dir, Binaries: opts.Binaries}
	if cp.Dir == "" {
		if cp.Dir, err = os.MkdirTemp("", "mccm-e2e-"); err != nil {
			return nil, fmt.Errorf("control plane: %w", err)
		}
		cp.ownDir = true
	}
	defer func() {
		if err != nil {
			_ = cp.stopProcesses()
		}
	}()
	if cp.pki, err = generatePKI(cp.Dir); err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	cp.CAFile = cp.pki.CAFile
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	etcdURL, err := cp.startEtcd(ctx)
	if err != nil {
		return nil, err
	}
	if err := cp.startAPIServer(ctx, etcdURL, opts.ExtraAPIServerArgs); err != nil {
		return nil, err
	}
	return cp, nil
}

func (cp *ControlPlane) startEtcd(ctx context.Context) (string, error) {
	ports, err := freePorts(2)
	if err != nil {
		return "", fmt.Errorf("etcd: %w", err)
	}
	client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	cp.etcd, err = StartProcess(ProcessOptions{
		Name: "etcd",
		Path: cp.Binaries.Etcd,
		Args: []string{
			"--name=e2e",
			"--data-dir=" + filepath.Join(cp.Dir, "etcd-data"),
			"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=e2e=" + peer,
			"--unsafe-no-fsync", "--log-level=warn",
		},
		// etcd reads every ETCD_* variable (ETCD_BIN included) as a flag.
		Env:     envWithout("ETCD_"),
		LogPath: filepath.Join(cp.Dir, "etcd.log"),
	})
	if err != nil {
		return "", err
	}
	httpc := &http.Client{Timeout: 2 * time.Second}
	err = cp.etcd.waitUntil(ctx, "/health", 100*time.Millisecond, func(ctx context.Context) error {
		return httpOK(ctx, httpc, client+"/health", "")
	})
	return client, err
}

func (cp *ControlPlane) startAPIServer(ctx context.Context, etcdURL string, extra []string) error {
	port, err := FreePort()
	if err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	cp.URL = "https://127.0.0.1:" + strconv.Itoa(port)
	cp.AdminToken = randomToken()
	tokens := filepath.Join(cp.Dir, "tokens.csv")
	if err := writeFile(tokens, []byte(cp.AdminToken+`,admin,admin-uid,"system:masters"`+"\n")); err != nil {
		return err
	}
	args := mergeFlags([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + cp.pki.ServingCert, "--tls-private-key-file=" + cp.pki.ServingKey,
		"--client-ca-file=" + cp.pki.CAFile,
		"--token-auth-file=" + tokens,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + cp.pki.SAPub,
		"--service-account-signing-key-file=" + cp.pki.SAKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		// 1.37 refuses to advertise a loopback address with the default reconciler.
		"--endpoint-reconciler-type=none",
		"--storage-media-type=application/json",
	}, extra)
	cp.apiserver, err = StartProcess(ProcessOptions{
		Name: "kube-apiserver", Path: cp.Binaries.APIServer, Args: args,
		LogPath: filepath.Join(cp.Dir, "kube-apiserver.log"),
	})
	if err != nil {
		return err
	}
	if err := cp.writeAdminKubeconfig(); err != nil {
		return err
	}
	httpc, err := cp.httpClient()
	if err != nil {
		return err
	}
	return cp.apiserver.waitUntil(ctx, "/readyz", 200*time.Millisecond, func(ctx context.Context) error {
		return httpOK(ctx, httpc, cp.URL+"/readyz", cp.AdminToken)
	})
}

func (cp *ControlPlane) writeAdminKubeconfig() error {
	cp.AdminKubeconfig = filepath.Join(cp.Dir, "admin.kubeconfig")
	if err := cp.WriteKubeconfig(cp.AdminKubeconfig, "admin", cp.AdminToken); err != nil {
		return err
	}
	cp.Config = cp.RESTConfig(cp.AdminToken)
	client, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return fmt.Errorf("control plane: admin client: %w", err)
	}
	cp.Client = client
	return nil
}

// RESTConfig returns a client configuration authenticating with token.
func (cp *ControlPlane) RESTConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            cp.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: cp.CAFile},
		QPS:             100,
		Burst:           200,
	}
}

// WriteKubeconfig writes a kubeconfig for this control plane that
// authenticates as user with a bearer token.
func (cp *ControlPlane) WriteKubeconfig(path, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: cp.URL, CertificateAuthority: cp.CAFile}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: user}
	cfg.CurrentContext = "e2e"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return nil
}

// ServiceAccountKubeconfig creates namespace/name (if missing), mints a
// token for it through the TokenRequest API and writes a kubeconfig using
// that token. It returns the file's path. RBAC for the ServiceAccount is
// up to the caller.
func (cp *ControlPlane) ServiceAccountKubeconfig(ctx context.Context, namespace, name string) (string, error) {
	if err := cp.ensureNamespace(ctx, namespace); err != nil {
		return "", err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := cp.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("service account %s/%s: %w", namespace, name, err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}
	tr, err := cp.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, tr, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("service account %s/%s: token: %w", namespace, name, err)
	}
	path := filepath.Join(cp.Dir, fmt.Sprintf("sa-%s-%s.kubeconfig", namespace, name))
	user := fmt.Sprintf("system:serviceaccount:%s:%s", namespace, name)
	return path, cp.WriteKubeconfig(path, user, tr.Status.Token)
}

func (cp *ControlPlane) ensureNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	return nil
}

// Kubectl runs kubectl against this control plane as admin and returns its
// combined output.
func (cp *ControlPlane) Kubectl(ctx context.Context, args ...string) (string, error) {
	return cp.KubectlWith(ctx, cp.AdminKubeconfig, nil, args...)
}

// KubectlWith runs kubectl with the given kubeconfig and standard input.
// It returns standard output; standard error is part of the error.
func (cp *ControlPlane) KubectlWith(ctx context.Context, kubeconfig string, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, cp.Binaries.Kubectl, append([]string{"--kubeconfig=" + kubeconfig}, args...)...) //nolint:gosec // Binary from the test configuration.
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stderr = stdin, &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %v: %w\n%s", args, err, stderr.String())
	}
	return string(out), nil
}

// Stop stops kube-apiserver and etcd and removes Dir unless keep is true,
// E2E_KEEP is set, or the folder was given by the caller. It reports a
// process that had died before it was stopped.
func (cp *ControlPlane) Stop(keep bool) error {
	err := cp.stopProcesses()
	if cp.ownDir && !keep && os.Getenv(EnvKeep) == "" {
		if rerr := os.RemoveAll(cp.Dir); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	return err
}

func (cp *ControlPlane) stopProcesses() error {
	var errs []error
	for _, p := range []*Process{cp.apiserver, cp.etcd} {
		if p != nil {
			errs = append(errs, p.Stop(10*time.Second))
		}
	}
	return errors.Join(errs...)
}

// Logs returns the tails of etcd's and kube-apiserver's logs.
func (cp *ControlPlane) Logs(lines int) string {
	out := ""
	for _, p := range []*Process{cp.etcd, cp.apiserver} {
		if p != nil {
			out += fmt.Sprintf("----- %s log (%s) -----\n%s\n", p.Name(), p.LogPath(), p.LogTail(lines))
		}
	}
	return out
}

// httpClient returns an http.Client trusting the control plane's CA.
func (cp *ControlPlane) httpClient() (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cp.pki.caPEM) {
		return nil, errors.New("control plane: CA certificate does not parse")
	}
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}, nil
}

// httpOK answers nil when GET url (with an optional bearer token) returns 200.
func httpOK(ctx context.Context, c *http.Client, url, token string) error {
	code, body, err := httpGet(ctx, c, url, token)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("%w: GET %s: %d %s", errNotReady, url, code, truncate(body, 300))
	}
	return nil
}

func httpGet(ctx context.Context, c *http.Client, url, token string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close() //nolint:errcheck // Read-only body.
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, body, fmt.Errorf("GET %s: %w", url, err)
	}
	return resp.StatusCode, body, nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
