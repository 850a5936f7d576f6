package router

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/metrics/testutil"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
)

// TestClassifyVSphere classifies the errors govmomi returns from vcsim:
// refused credentials, a call without a session, a missing privilege (a
// fault vcsim injects), a VM that is gone, and a task fault of no class;
// each wrapped as the vSphere backend wraps them. The router imports no
// SDK: the vsphere type's classifier answers (backends.ClassifyError).
func TestClassifyVSphere(t *testing.T) {
	ctx := context.Background()
	model := simulator.VPX()
	t.Cleanup(model.Remove)
	if err := model.Create(); err != nil {
		t.Fatal(err)
	}
	server := model.Service.NewServer()
	t.Cleanup(server.Close)
	vim := simClient(ctx, t, server.URL)
	vm := model.Map().Any("VirtualMachine").(*simulator.VirtualMachine)
	model.Service.AddFaultRule(&simulator.FaultInjectionRule{
		MethodName: "PowerOffVM_Task", ObjectType: "VirtualMachine", ObjectName: "*",
		Probability: 1, FaultType: simulator.FaultTypeNoPermission, Enabled: true,
	})

	cases := map[string]struct {
		err  error
		want backend.ErrorClass
	}{
		"InvalidLogin": {
			err:  backends.NewUserError("VSphereLoginFailed", fmt.Errorf("refused: %w", login(ctx, t, server.URL, "nobody", ""))),
			want: backend.ClassAuth,
		},
		"NotAuthenticated": {err: powerOn(ctx, t, simClient(ctx, t, server.URL, withoutLogin), vm.Reference()), want: backend.ClassAuth},
		"NoPermission":     {err: powerOff(ctx, vim, vm.Reference()), want: backend.ClassAuth},
		"ManagedObjectNotFound": {
			err:  property.DefaultCollector(vim).RetrieveOne(ctx, types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-gone"}, []string{"name"}, &mo.VirtualMachine{}),
			want: backend.ClassNotFound,
		},
		"InvalidPowerState task fault": {err: powerOn(ctx, t, vim, vm.Reference()), want: backend.ClassOther},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("vcsim returned no error")
			}
			err := fmt.Errorf("vCenter vc1: %w", tc.err)
			if got := backend.Classify(err); got != tc.want {
				t.Errorf("classify(%v) = %s, want %s", err, got, tc.want)
			}
		})
	}
}

// TestAuthFaultMarksDown: refused credentials are no answer even when the
// backend reports them as the user's to fix: three in a row make the
// backend down.
func TestAuthFaultMarksDown(t *testing.T) {
	refused := backends.NewUserError("VSphereLoginFailed", fmt.Errorf("logging in: %w", soap.WrapVimFault(&types.InvalidLogin{})))
	if backend.Answered(refused) {
		t.Errorf("answered(%v) = true, want false", refused)
	}
	if other := backends.NewUserError("BadThing", errors.New("fix it")); !backend.Answered(other) {
		t.Errorf("answered(%v) = false, want true", other)
	}
}

type simClientOption func(*soap.Client) bool

// withoutLogin makes simClient skip the login.
func withoutLogin(*soap.Client) bool { return false }

func simClient(ctx context.Context, t *testing.T, u *url.URL, opts ...simClientOption) *vim25.Client {
	t.Helper()
	sc := soap.NewClient(u, true)
	vim, err := vim25.NewClient(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		if !o(sc) {
			return vim
		}
	}
	if err := session.NewManager(vim).Login(ctx, u.User); err != nil {
		t.Fatal(err)
	}
	return vim
}

func login(ctx context.Context, t *testing.T, u *url.URL, user, password string) error {
	return session.NewManager(simClient(ctx, t, u, withoutLogin)).Login(ctx, url.UserPassword(user, password))
}

func powerOn(ctx context.Context, t *testing.T, vim *vim25.Client, ref types.ManagedObjectReference) error {
	t.Helper()
	task, err := object.NewVirtualMachine(vim, ref).PowerOn(ctx)
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}

func powerOff(ctx context.Context, vim *vim25.Client, ref types.ManagedObjectReference) error {
	task, err := object.NewVirtualMachine(vim, ref).PowerOff(ctx)
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}

// TestVSphereThrottlingCounted is issue 40's defect 10: a vCenter
// answering the SOAP API HTTP 429 (govmomi reports it as a url.Error
// around an unexported status error with no status method) is counted by
// multicloud_ccm_backend_errors_total{class="throttled"}, so the
// MulticloudCCMCloudAPIThrottled alert can fire for a vCenter; a SOAP
// login answered 401 is auth. A real vSphere backend (built through its
// registration, as the CCM builds it) talks through the router to vcsim
// behind a TLS proxy answering every matching call. Before the backends
// classed their own errors, both were other.
func TestVSphereThrottlingCounted(t *testing.T) {
	model := simulator.VPX()
	t.Cleanup(model.Remove)
	if err := model.Create(); err != nil {
		t.Fatal(err)
	}
	model.Service.Listen = &url.URL{User: url.UserPassword("user", "pass")}
	server := model.Service.NewServer()
	t.Cleanup(server.Close)
	target := *server.URL
	target.Path, target.User = "", nil
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(&target) }}
	var answer atomic.Value // "status method", e.g. "429 RetrievePropertiesEx"; "" passes everything
	answer.Store("")
	proxy := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var status int
		var method string
		if _, err := fmt.Sscanf(answer.Load().(string), "%d %s", &status, &method); err == nil && strings.HasPrefix(r.URL.Path, "/sdk") {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte("<"+method+" ")) {
				w.Header().Set("Retry-After", "0")
				http.Error(w, http.StatusText(status), status)
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	proxy.Config.ErrorLog = log.New(io.Discard, "", 0)
	proxy.StartTLS()
	t.Cleanup(proxy.Close)

	dir := t.TempDir()
	for name, v := range map[string]string{"user": "user", "password": "pass"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	section := fmt.Sprintf(`{"vcenters": [{"server": "https://%s", "thumbprint": %q, "datacenters": ["DC0"],
		"username": {"file": "user"}, "password": {"file": "password"}}], "requestTimeout": "10s"}`,
		strings.TrimPrefix(proxy.URL, "https://"), soap.ThumbprintSHA256(proxy.Certificate()))
	reg, ok := backends.Lookup("vsphere")
	if !ok {
		t.Fatal("type vsphere is not registered")
	}
	settings, errs := reg.Parse([]byte(section), field.NewPath("backends").Index(0).Child("vsphere"), dir)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	name := "errclass-" + t.Name()
	vm := model.Map().Any("VirtualMachine").(*simulator.VirtualMachine)
	node := newNode("n", withProviderID("vsphere://"+vm.Config.Uuid))
	count := func(op, class string) float64 {
		v, err := testutil.GetCounterMetricValue(backend.BackendErrors.WithLabelValues(name, op, class))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct{ answer, class string }{
		{"429 RetrievePropertiesEx", "throttled"},
		{"401 Login", "auth"},
	} {
		cloud, err := reg.New(context.Background(), backends.Options{Name: name, ClusterID: "test", Settings: settings})
		if err != nil {
			t.Fatal(err)
		}
		r := mustRouter(t, testConfig(), Backend{Name: name, Type: "vsphere", Scheme: "vsphere", Cloud: cloud})
		answer.Store(tc.answer)
		before := [2]float64{count("InstanceExists", tc.class), count("InstanceExists", "other")}
		if ok, err := r.InstanceExists(context.Background(), node); err == nil {
			t.Fatalf("InstanceExists with vCenter answering %s = %v, nil; want an error", tc.answer, ok)
		}
		got := [2]float64{count("InstanceExists", tc.class) - before[0], count("InstanceExists", "other") - before[1]}
		if got != [2]float64{1, 0} {
			t.Errorf("vCenter answering %s: backend_errors_total{class=%q} grew by %v, {class=\"other\"} by %v; want 1 and 0", tc.answer, tc.class, got[0], got[1])
		}
		answer.Store("")
	}
}
