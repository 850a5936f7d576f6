package openstack

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// octaviaRecorder is a reverse proxy in front of the real Octavia that
// records every mutating call as "METHOD /path" with the path's IDs
// replaced by {id}, so a test can tell creates and deletes from updates.
type octaviaRecorder struct {
	mu     sync.Mutex
	writes []string
	url    string
}

func newOctaviaRecorder(t *testing.T) *octaviaRecorder {
	t.Helper()
	u, err := url.Parse(os.Getenv("OCTAVIA_ENDPOINT"))
	if err != nil || u.Host == "" {
		t.Fatalf("OCTAVIA_ENDPOINT %q: %v", os.Getenv("OCTAVIA_ENDPOINT"), err)
	}
	rec := &octaviaRecorder{}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			rec.mu.Lock()
			rec.writes = append(rec.writes, r.Method+" "+genericPath(r.URL.Path))
			rec.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rec.url = srv.URL
	return rec
}

// genericPath replaces UUIDs in a path by {id}.
func genericPath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if uuidRE.MatchString(s) {
			parts[i] = "{id}"
		}
	}
	return strings.Join(parts, "/")
}

// Writes returns the mutating calls recorded so far.
func (r *octaviaRecorder) Writes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string{}, r.writes...)
}

// svcEnv is the upstream service controller over a router whose only
// backend is the OpenStack one, on the real Keystone + Octavia (through a
// recording proxy), with a fake API server.
type svcEnv struct {
	client  *fake.Clientset
	cloud   *Cloud
	octavia *octaviaRecorder
	ctx     context.Context
}

// newSvcEnv starts the service controller with nodes in the API server.
// tweak may change the backend's settings first.
func newSvcEnv(t *testing.T, tweak func(*Settings), nodes ...*corev1.Node) *svcEnv {
	t.Helper()
	s := realOctavia(t)
	e := &svcEnv{octavia: newOctaviaRecorder(t)}
	s.Endpoints.LoadBalancer = e.octavia.url
	if tweak != nil {
		tweak(s)
	}
	clusterID := "t" + randomID(t)
	e.cloud = newRealCloud(t, s, clusterID)
	cfg := &config.CloudConfig{ClusterID: clusterID, LoadBalancer: config.LoadBalancer{DefaultBackend: "os"}}
	r, err := router.New(cfg, []router.Backend{{Name: "os", Type: "openstack", Scheme: "openstack", Cloud: e.cloud}})
	if err != nil {
		t.Fatal(err)
	}
	e.client = fake.NewClientset()
	for _, n := range nodes {
		if _, err := e.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.ctx = ctx
	r.Initialize(testutil.NewClientBuilder(e.client), ctx.Done())
	testutil.StartServiceController(t, r, e.client, "kubernetes", 2)
	t.Cleanup(cancel)
	// Upstream's service controller races its start-up node sync against
	// its service workers; Services come after it.
	time.Sleep(time.Second)
	return e
}

// readyNode is a Ready node with an InternalIP and labels.
func readyNode(name, ip string, labels map[string]string) *corev1.Node {
	n := newNode(name, withInternalIP(ip))
	for k, v := range labels {
		n.Labels[k] = v
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return n
}

// apply creates the Service or replaces its annotations and ports.
func (e *svcEnv) apply(t *testing.T, svc *corev1.Service) {
	t.Helper()
	cur, err := e.client.CoreV1().Services(svc.Namespace).Get(e.ctx, svc.Name, metav1.GetOptions{})
	if err != nil {
		if _, err := e.client.CoreV1().Services(svc.Namespace).Create(e.ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	cur.Annotations = svc.Annotations
	cur.Spec.Ports = svc.Spec.Ports
	if _, err := e.client.CoreV1().Services(svc.Namespace).Update(e.ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *svcEnv) service(t *testing.T, name string) *corev1.Service {
	t.Helper()
	s, err := e.client.CoreV1().Services("default").Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// warnings returns the Warning events on the Service as "Reason: message".
func (e *svcEnv) warnings(t *testing.T, name string) []string {
	t.Helper()
	list, err := e.client.CoreV1().Events("").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		if ev.Type == corev1.EventTypeWarning && ev.InvolvedObject.Kind == "Service" && ev.InvolvedObject.Name == name {
			out = append(out, ev.Reason+": "+ev.Message)
		}
	}
	return out
}

// detail describes what Octavia holds for a Service, listener by listener,
// with every field an annotation sets; "" when it has no load balancer.
// A read that races a change Octavia is applying (a pool deleted between
// listing it and reading its monitor) is returned as an error, to retry.
func detail(c *Cloud, svc *corev1.Service) (string, *loadbalancers.LoadBalancer, error) {
	ctx := context.Background()
	sc, err := c.lb.clients(ctx)
	if err != nil {
		return "", nil, err
	}
	found, err := c.lb.find(ctx, sc, svc)
	if err != nil {
		return "", nil, err
	}
	if len(found) != 1 {
		return fmt.Sprintf("%d load balancers", len(found)), nil, nil
	}
	st, err := readState(ctx, sc.loadBalancer, found[0].ID)
	if err != nil {
		return "", nil, err
	}
	var lines []string
	for _, ls := range st.listeners {
		d := fmt.Sprintf("%s/%d conn=%d t=%d/%d/%d/%d xff=%s", ls.Protocol, ls.ProtocolPort, ls.ConnLimit,
			ls.TimeoutClientData, ls.TimeoutMemberConnect, ls.TimeoutMemberData, ls.TimeoutTCPInspect, ls.InsertHeaders[headerXForwardedFor])
		if p := st.pools[ls.DefaultPoolID]; p != nil {
			d += fmt.Sprintf(" pool=%s:%s", p.pool.Protocol, p.pool.LBMethod)
			if m := p.monitor; m != nil {
				d += fmt.Sprintf(" monitor=%s:%d/%d/%d/%d", m.Type, m.Delay, m.Timeout, m.MaxRetries, m.MaxRetriesDown)
			}
			var ms []string
			for _, m := range p.members {
				ms = append(ms, m.Name)
			}
			sort.Strings(ms)
			d += " members=" + strings.Join(ms, ",")
		}
		lines = append(lines, d)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n"), &found[0], nil
}

// waitDetail waits until Octavia holds want for the Service and the
// Service's status passes check.
func (e *svcEnv) waitDetail(t *testing.T, svc *corev1.Service, want string, check func(corev1.LoadBalancerStatus) error) *loadbalancers.LoadBalancer {
	t.Helper()
	var lb *loadbalancers.LoadBalancer
	eventuallyOn(t, 240*time.Second, "Octavia converged for "+svc.Name, func() error {
		got, found, err := detail(e.cloud, svc)
		if err != nil {
			return err
		}
		lb = found
		if got != want {
			return fmt.Errorf("Octavia holds\n%s\nwant\n%s\nwarnings: %q", got, want, e.warnings(t, svc.Name))
		}
		return check(e.service(t, svc.Name).Status.LoadBalancer)
	})
	return lb
}
