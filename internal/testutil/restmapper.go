package testutil

import (
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/kubernetes/fake"
)

// The REST mapper client-go's fake clientsets resolve a resource's kind
// with, built once for the test binary.
var (
	sharedMapperOnce sync.Once
	sharedMapper     meta.RESTMapper
)

// ShareRESTMapper makes client, from fake.NewClientset, build its REST
// mapper once per test binary instead of once per write. client-go's
// field-managed object tracker (testing.NewFieldManagedObjectTracker, what
// fake.NewClientset keeps objects in) calls
// testrestmapper.TestOnlyStaticRESTMapper on every Create, Update, Patch
// and Apply to map the resource to its kind: a mapper of every type in the
// clientset's scheme, thousands of map inserts, rebuilt and dropped each
// time. That was about half the CPU of pkg/router's tests (most of
// TestServiceChurnKeepsNoState's 10,000 Services) and more under -race.
//
// The mapper is the same each time: every fake.NewClientset tracker builds
// it from the fake package's one scheme, filled at init and never changed,
// and a built mapper is only read (KindFor), so one can serve every
// clientset and goroutine. What the tracker does with the kind it maps to
// is unchanged. The tracker keeps the mapper in an unexported field; it is
// replaced here, before the client is used, and a client-go whose tracker
// no longer has that field fails every test that calls this, naming it,
// rather than going slow without a word.
func ShareRESTMapper(client *fake.Clientset) *fake.Clientset {
	v := reflect.ValueOf(client.Tracker())
	var f reflect.Value
	if v.Kind() == reflect.Pointer && v.Elem().Kind() == reflect.Struct {
		f = v.Elem().FieldByName("mapper")
	}
	want := reflect.TypeFor[func() meta.RESTMapper]()
	if !f.IsValid() || f.Type() != want {
		panic(fmt.Sprintf("testutil.ShareRESTMapper: the fake clientset's tracker %T has no field mapper of type %v; see internal/testutil/restmapper.go", client.Tracker(), want))
	}
	mapper := (*func() meta.RESTMapper)(unsafe.Pointer(f.UnsafeAddr())) //nolint:gosec // G103: the one way to reach client-go's unexported field; type checked above.
	build := *mapper
	sharedMapperOnce.Do(func() { sharedMapper = build() })
	*mapper = func() meta.RESTMapper { return sharedMapper }
	return client
}
