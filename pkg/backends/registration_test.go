package backends_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/internal/chartschema"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// tiny is a backend type that exists only in this test: one Register call
// is all it takes for the config parser, the router and the chart schema
// check to know it. No other backend package is imported here.
const tinyType = "tiny"

// tinySettings is the tiny type's config section.
type tinySettings struct {
	// Instances are the names of the machines it owns, as tiny://NAME.
	Instances []string `json:"instances"`
}

func parseTiny(raw []byte, path *field.Path, _ string) (any, field.ErrorList) {
	s := &tinySettings{}
	if errs := config.DecodeSection(raw, path, s); len(errs) > 0 {
		return nil, errs
	}
	if len(s.Instances) == 0 {
		return nil, field.ErrorList{field.Required(path.Child("instances"), "list at least one instance")}
	}
	return s, nil
}

// tinyCloud answers InstancesV2 from its settings and counts the calls.
type tinyCloud struct {
	backends.InstancesV2Only
	s     *tinySettings
	mu    sync.Mutex
	calls []string
}

func (c *tinyCloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}
func (c *tinyCloud) ProviderName() string                                              { return tinyType }
func (c *tinyCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool)                  { return nil, false }
func (c *tinyCloud) Routes() (cloudprovider.Routes, bool)                              { return nil, false }
func (c *tinyCloud) InstancesV2() (cloudprovider.InstancesV2, bool)                    { return c, true }

func (c *tinyCloud) has(node *corev1.Node) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, node.Spec.ProviderID)
	for _, n := range c.s.Instances {
		if node.Spec.ProviderID == tinyType+"://"+n {
			return true
		}
	}
	return false
}

func (c *tinyCloud) InstanceExists(_ context.Context, node *corev1.Node) (bool, error) {
	return c.has(node), nil
}

func (c *tinyCloud) InstanceShutdown(context.Context, *corev1.Node) (bool, error) { return false, nil }

func (c *tinyCloud) InstanceMetadata(_ context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	c.has(node)
	return &cloudprovider.InstanceMetadata{ProviderID: node.Spec.ProviderID, InstanceType: "tiny.1"}, nil
}

var (
	registerTiny sync.Once
	tinyClouds   []*tinyCloud
)

func registerTinyType() {
	registerTiny.Do(func() {
		backends.Register(backends.Registration{
			Type: tinyType, Scheme: tinyType, Parse: parseTiny,
			New: func(_ context.Context, o backends.Options) (cloudprovider.Interface, error) {
				c := &tinyCloud{s: o.Settings.(*tinySettings)}
				tinyClouds = append(tinyClouds, c)
				return c, nil
			},
		})
	})
}

// TestOneRegistration: a backend type registered once, here, is parsed by
// config (its section strictly, under its own path), routed to by the
// router (by its providerID scheme), and checked against the chart schema,
// which does not list it.
func TestOneRegistration(t *testing.T) {
	registerTinyType()
	const head = "apiVersion: multicloud-ccm.io/v1alpha1\nkind: CloudConfig\nclusterID: demo\nbackends:\n"

	// config: the section goes to the tiny parser, errors under its path.
	_, err := config.Parse([]byte(head+"- {name: t1, type: tiny, tiny: {instancs: [a]}}\n"), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), `backends[0].tiny.instancs: Forbidden: unknown field: remove it or fix its spelling (did you mean "instances"?)`) {
		t.Errorf("a misspelt key in the tiny section: err = %v", err)
	}
	_, err = config.Parse([]byte(head+"- {name: t1, type: tiny, tiny: {instances: []}}\n- {name: t2, type: gcp}\n"), t.TempDir())
	for _, want := range []string{"backends[0].tiny.instances: Required value", `backends[1].type: Unsupported value: "gcp": supported values: "tiny"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v; want it to say %q", err, want)
		}
	}
	cfg, err := config.Parse([]byte(head+"- {name: t1, type: tiny, tiny: {instances: [a, b]}}\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := cfg.Backends[0].Settings.(*tinySettings); !ok || len(s.Instances) != 2 {
		t.Fatalf("Settings = %#v, want the tiny parser's", cfg.Backends[0].Settings)
	}

	// router: a tiny:// node goes to the tiny backend.
	tinyClouds = nil
	r, err := router.NewFromConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	node := func(pid string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{ProviderID: pid}}
	}
	if ok, err := r.InstanceExists(context.Background(), node("tiny://a")); !ok || err != nil {
		t.Errorf("InstanceExists(tiny://a) = %v, %v; want true", ok, err)
	}
	if ok, err := r.InstanceExists(context.Background(), node("tiny://gone")); ok || err != nil {
		t.Errorf("InstanceExists(tiny://gone) = %v, %v; want false", ok, err)
	}
	if md, err := r.InstanceMetadata(context.Background(), node("tiny://b")); err != nil || md.InstanceType != "tiny.1" {
		t.Errorf("InstanceMetadata(tiny://b) = %+v, %v", md, err)
	}
	if len(tinyClouds) != 1 || strings.Join(tinyClouds[0].calls, ",") != "tiny://a,tiny://gone,tiny://b" {
		t.Errorf("the tiny backend was asked %v", tinyClouds)
	}

	// chart schema: the check names the type the schema lacks.
	schema, err := chartschema.Load()
	if err != nil {
		t.Fatal(err)
	}
	err = chartschema.CheckBackendTypes(schema, backends.Types())
	if err == nil || !strings.Contains(err.Error(), `backend type "tiny" is registered but missing from `+chartschema.Path) {
		t.Errorf("the schema check does not report tiny missing: %v", err)
	}
}

// TestRegisterRefuses: a type is registered once, with a parser and a
// constructor.
func TestRegisterRefuses(t *testing.T) {
	registerTinyType()
	for name, reg := range map[string]backends.Registration{
		"twice":        {Type: tinyType, Scheme: tinyType, Parse: parseTiny, New: func(context.Context, backends.Options) (cloudprovider.Interface, error) { return nil, nil }},
		"no parser":    {Type: "tiny2", New: func(context.Context, backends.Options) (cloudprovider.Interface, error) { return nil, nil }},
		"no new":       {Type: "tiny3", Parse: parseTiny},
		"no type name": {Parse: parseTiny},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("Register did not panic")
				}
			}()
			backends.Register(reg)
		})
	}
	if types := backends.Types(); strings.Join(types, ",") != tinyType {
		t.Errorf("Types() = %v after refused registrations", types)
	}
}
