package lbcontroller

import (
	"encoding/json"
	"strconv"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// newVersionedClientset is utilt.NewClientset whose objects carry
// resourceVersions as the API server's do (the plain fake leaves them
// empty): every write stores a new one, and a write that carries one (an
// update, or a merge patch's metadata.resourceVersion) is refused with a
// Conflict unless it is the stored one.
func newVersionedClientset(objs ...runtime.Object) *fake.Clientset {
	var rv atomic.Int64
	next := func() string { return strconv.FormatInt(rv.Add(1), 10) }
	for _, o := range objs {
		if m, err := meta.Accessor(o); err == nil {
			m.SetResourceVersion(next())
		}
	}
	client := utilt.NewClientset(objs...)
	tracker := client.Tracker()
	apply := clienttesting.ObjectReaction(tracker)
	stored := func(gvr schema.GroupVersionResource, ns, name string) string {
		obj, err := tracker.Get(gvr, ns, name)
		if err != nil {
			return ""
		}
		m, _ := meta.Accessor(obj)
		return m.GetResourceVersion()
	}
	conflict := func(gvr schema.GroupVersionResource, name string) error {
		return apierrors.NewConflict(gvr.GroupResource(), name, errOutdated)
	}
	client.PrependReactor("create", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if m, err := meta.Accessor(a.(clienttesting.CreateAction).GetObject()); err == nil {
			m.SetResourceVersion(next())
		}
		return false, nil, nil
	})
	client.PrependReactor("delete", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		// A delete that only marks the object (it has finalizers) is a
		// write: the API server stores a new resourceVersion with the
		// deletion timestamp.
		d := a.(clienttesting.DeleteAction)
		obj, err := tracker.Get(d.GetResource(), d.GetNamespace(), d.GetName())
		if err != nil {
			return false, nil, nil
		}
		m, err := meta.Accessor(obj)
		if err != nil || len(m.GetFinalizers()) == 0 || m.GetDeletionTimestamp() != nil {
			return false, nil, nil
		}
		now := metav1.Now()
		m.SetDeletionTimestamp(&now)
		m.SetResourceVersion(next())
		if err := tracker.Update(d.GetResource(), obj, d.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	})
	client.PrependReactor("update", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		m, err := meta.Accessor(a.(clienttesting.UpdateAction).GetObject())
		if err != nil {
			return false, nil, nil
		}
		if want := m.GetResourceVersion(); want != "" && want != stored(a.GetResource(), a.GetNamespace(), m.GetName()) {
			return true, nil, conflict(a.GetResource(), m.GetName())
		}
		m.SetResourceVersion(next())
		return false, nil, nil
	})
	client.PrependReactor("patch", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		p := a.(clienttesting.PatchAction)
		if p.GetPatchType() != types.MergePatchType {
			return false, nil, nil
		}
		var body map[string]any
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		md, _ := body["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			body["metadata"] = md
		}
		if want, _ := md["resourceVersion"].(string); want != "" && want != stored(a.GetResource(), a.GetNamespace(), p.GetName()) {
			return true, nil, conflict(a.GetResource(), p.GetName())
		}
		md["resourceVersion"] = next()
		raw, err := json.Marshal(body)
		if err != nil {
			return true, nil, err
		}
		handled, obj, err := apply(clienttesting.NewPatchSubresourceAction(a.GetResource(), a.GetNamespace(), p.GetName(), p.GetPatchType(), raw, a.GetSubresource()))
		if err != nil || obj == nil {
			return handled, obj, err
		}
		if m, merr := meta.Accessor(obj); merr == nil && m.GetDeletionTimestamp() != nil && len(m.GetFinalizers()) == 0 {
			if derr := tracker.Delete(a.GetResource(), a.GetNamespace(), m.GetName(), metav1.DeleteOptions{}); derr != nil {
				return true, nil, derr
			}
		}
		return handled, obj, nil
	})
	return client
}

// errOutdated is the API server's conflict message.
var errOutdated = errorString("the object has been modified; please apply your changes to the latest version and try again")

type errorString string

func (e errorString) Error() string { return string(e) }
