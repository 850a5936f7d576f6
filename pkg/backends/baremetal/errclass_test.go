package baremetal

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestClassifyError: the API server's answers as client-go returns them,
// the allocator's wait for the informer, and its user errors, by class.
func TestClassifyError(t *testing.T) {
	svc := schema.GroupResource{Resource: "services"}
	for _, tc := range []struct {
		err  error
		want backends.ErrorClass
	}{
		{fmt.Errorf("patching: %w", apierrors.NewTooManyRequests("slow down", 1)), backends.ClassThrottled},
		{apierrors.NewForbidden(svc, "web", errors.New("RBAC")), backends.ClassAuth},
		{apierrors.NewUnauthorized("token"), backends.ClassAuth},
		{apierrors.NewNotFound(svc, "web"), backends.ClassNotFound},
		{apierrors.NewServiceUnavailable("etcd"), backends.ClassUnavailable},
		{apierrors.NewBadRequest("bad"), backends.ClassUser},
		{apierrors.NewConflict(svc, "web", errors.New("changed")), backends.ClassOther},
		{fmt.Errorf("x: %w", errNotSeeded), backends.ClassUnavailable},
		{errors.New("x"), backends.ClassOther},
	} {
		if got := ClassifyError(tc.err); got != tc.want {
			t.Errorf("ClassifyError(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
	exhausted := backends.NewUserError(ReasonAddressPoolExhausted, errors.New("no free address"))
	if got := backends.ClassifyErrorOf(Type, exhausted); got != backends.ClassUser {
		t.Errorf("class of a pool exhausted = %s, want user", got)
	}
}
