package upstreamaws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clienttesting "k8s.io/client-go/testing"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/plan"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// ourConfig is the cloud-config of a multicloud-ccm taking over upstream's
// cluster: one aws backend on the fake, the default for Services.
func ourConfig(t *testing.T, e *env) *config.CloudConfig {
	t.Helper()
	t.Setenv("OURS_AWS_KEY", "AKIDOURS")
	t.Setenv("OURS_AWS_SECRET", "secret")
	raw := fmt.Sprintf(`apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: %s
loadBalancer:
  defaultBackend: aws
backends:
- name: aws
  type: aws
  aws:
    region: %s
    vpc: %s
    endpoints: {ec2: %q, elbv2: %q, sts: %q}
    credentials: {accessKeyID: {env: OURS_AWS_KEY}, secretAccessKey: {env: OURS_AWS_SECRET}}
`, clusterID, region, e.seeded.VPCID, e.url, e.url, e.url)
	cfg, err := config.Parse([]byte(raw), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// readOnlyCopy is a clientset holding the Nodes and Services of client as
// they are now, that refuses every request but get, list and watch, and
// reports the writes it refused.
func readOnlyCopy(t *testing.T, client kubernetes.Interface, tweak func(*v1.Service)) (kubernetes.Interface, func() []string) {
	t.Helper()
	ctx := context.Background()
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var objs []runtime.Object
	for i := range nodes.Items {
		objs = append(objs, &nodes.Items[i])
	}
	for i := range svcs.Items {
		if tweak != nil {
			tweak(&svcs.Items[i])
		}
		objs = append(objs, &svcs.Items[i])
	}
	ro := testutil.NewClientset(objs...)
	var mu sync.Mutex
	var writes []string
	ro.PrependReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		switch a.GetVerb() {
		case "get", "list", "watch":
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		writes = append(writes, a.GetVerb()+" "+a.GetResource().Resource)
		return true, nil, errors.New("read-only client")
	})
	return ro, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(writes)
	}
}

// plannedCalls are the AWS actions the plan's intents name, sorted.
func plannedCalls(rep *plan.Report) []string {
	var out []string
	for _, s := range rep.Services {
		for _, in := range append(slices.Clone(s.Adoption), s.Changes...) {
			_, action, _ := strings.Cut(in.Call, ":")
			out = append(out, action)
		}
	}
	slices.Sort(out)
	return out
}

// TestPlanThenSwitchFromUpstream is a cluster migrating from upstream's
// cloud-provider-aws: upstream's own provider (v1.37.1, on the fake,
// through the upstream service controller) made NLBs for a plain Service,
// an internal one and one with two ports. `multicloud-ccm plan` on that
// cluster says every node is claimed by aws (by scheme) and every NLB is
// adopted, with 0 changes, making no mutating AWS call and no API write.
// The same plan with the internal Service edited to internet-facing says
// that NLB would be replaced, and fails (exit status 1). Then the real
// switch (the router, initialised, through the upstream service
// controller) does exactly what the plan said: the same mutating calls
// (none), every NLB and DNS name kept.
func TestPlanThenSwitchFromUpstream(t *testing.T) {
	e := newEnv(t, 3)
	svcs := []*v1.Service{nlbService("plain", 80), nlbService("private", 8080), nlbService("web", 80, 443)}
	svcs[1].Annotations[annPrefix+"internal"] = "true"
	objs := []runtime.Object{}
	for _, svc := range svcs {
		objs = append(objs, svc)
	}
	for _, in := range e.seeded.Instances {
		objs = append(objs, readyNode(in))
	}
	client := testutil.NewClientset(objs...)
	stopUpstream := testutil.StartServiceController(t, e.cloud, client, clusterID, 2)
	dns := waitForHostnames(t, client, svcs)
	stopUpstream()
	cfg := ourConfig(t, e)

	e.fake.ResetCalls()
	ro, writes := readOnlyCopy(t, client, nil)
	rep, err := plan.Run(context.Background(), plan.Options{Config: cfg, Client: ro, ClusterName: clusterID})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Services {
		t.Logf("plan: %s/%s %s by %s (%s): adoption %v, changes %v, annotations %v %s", s.Namespace, s.Name, s.Outcome, s.Backend, s.ChosenBy, s.Adoption, s.Changes, s.Annotations, s.Error)
		if s.Outcome != plan.LBAdopted || s.Backend != "aws" || s.ChosenBy != "default" || len(s.Changes) != 0 || s.NewAddress != dns[s.Name] {
			t.Errorf("plan for %s: %s by %q (%s), %d changes, address %q; want adopted by aws (default), 0 changes, %s", s.Name, s.Outcome, s.Backend, s.ChosenBy, len(s.Changes), s.NewAddress, dns[s.Name])
		}
	}
	for _, n := range rep.Nodes {
		if n.Outcome != plan.NodeClaimed || n.Backend != "aws" || n.ChosenBy != "scheme" || !n.InstanceFound {
			t.Errorf("plan for node %s: %+v; want claimed by aws (scheme), instance found", n.Name, n)
		}
	}
	const want = "3 nodes claimed, 0 would be deleted; 3 load balancers adopted, 0 created, 0 replaced; 0 changes; 0 annotations not honoured"
	if got := rep.Summary.String(); got != want || rep.Summary.Failed() {
		t.Errorf("summary %q (fails: %v), want %q and success", got, rep.Summary.Failed(), want)
	}
	if m := e.fake.MutatingCalls(); len(m) != 0 {
		t.Errorf("the plan made mutating AWS calls: %v", m)
	}
	if w := writes(); len(w) != 0 {
		t.Errorf("the plan wrote to the API server: %v", w)
	}
	planned := plannedCalls(rep)
	t.Logf("plan: %s; AWS calls %v", rep.Summary, e.fake.CallCounts())

	toPublic, toPublicWrites := readOnlyCopy(t, client, func(s *v1.Service) {
		if s.Name == "private" {
			delete(s.Annotations, annPrefix+"internal")
		}
	})
	rep2, err := plan.Run(context.Background(), plan.Options{Config: cfg, Client: toPublic, ClusterName: clusterID})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep2.Services {
		if s.Name == "private" && s.Outcome != plan.LBReplaced {
			t.Errorf("plan for private made internet-facing: %s, changes %v; want REPLACED", s.Outcome, s.Changes)
		}
	}
	if !rep2.Summary.Failed() || rep2.Summary.LBReplaced != 1 {
		t.Errorf("summary %q: want 1 replaced and a failure (exit status 1)", rep2.Summary)
	}
	if m := e.fake.MutatingCalls(); len(m) != 0 || len(toPublicWrites()) != 0 {
		t.Errorf("the second plan made mutating AWS calls %v or API writes %v", m, toPublicWrites())
	}
	t.Logf("plan with private made internet-facing: %s", rep2.Summary)

	deleteEvents(t, client)
	e.fake.ResetCalls()
	r, err := router.NewFromConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	r.Initialize(testutil.NewClientBuilder(client), stop)
	testutil.StartServiceController(t, r, client, clusterID, 2)
	waitForEnsured(t, client, svcs)
	testutil.Eventually(t, time.Minute, "every Service served by aws", func() error {
		for _, svc := range svcs {
			s, err := client.CoreV1().Services(svc.Namespace).Get(context.Background(), svc.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if s.Annotations["multicloud-ccm.io/load-balancer-served-by"] != "aws" {
				return fmt.Errorf("service %s: annotations %v", s.Name, s.Annotations)
			}
		}
		return nil
	})
	var done []string
	for _, a := range e.fake.MutatingCalls() {
		done = append(done, a)
	}
	slices.Sort(done)
	if !slices.Equal(done, planned) {
		t.Errorf("the switch made mutating calls %v; the plan said %v", done, planned)
	}
	if got := waitForHostnames(t, client, svcs); fmt.Sprint(got) != fmt.Sprint(dns) {
		t.Errorf("status hostnames after the switch %v, before %v", got, dns)
	}
	t.Logf("switch: %d mutating calls, as planned; AWS calls %v", len(done), e.fake.CallCounts())
}
