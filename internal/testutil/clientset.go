package testutil

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// NewClientset is a fake clientset holding objs that deletes as the API
// server does: deleting an object with finalizers only sets its deletion
// timestamp, and the write that removes the last finalizer of such an
// object removes the object. The plain fake deletes at once and keeps
// finalizer-less objects marked for deletion, which upstream's service
// controller would ensure again.
func NewClientset(objs ...runtime.Object) *fake.Clientset {
	client := ShareRESTMapper(fake.NewClientset(objs...))
	tracker := client.Tracker()
	apply := clienttesting.ObjectReaction(tracker)
	client.PrependReactor("delete", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		d := a.(clienttesting.DeleteAction)
		obj, err := tracker.Get(d.GetResource(), d.GetNamespace(), d.GetName())
		if err != nil {
			return false, nil, nil
		}
		m, err := meta.Accessor(obj)
		if err != nil || len(m.GetFinalizers()) == 0 {
			return false, nil, nil
		}
		if m.GetDeletionTimestamp() == nil {
			now := metav1.Now()
			m.SetDeletionTimestamp(&now)
			if err := tracker.Update(d.GetResource(), obj, d.GetNamespace()); err != nil {
				return true, nil, err
			}
		}
		return true, obj, nil
	})
	for _, verb := range []string{"update", "patch"} {
		client.PrependReactor(verb, "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
			handled, obj, err := apply(a)
			if err != nil || obj == nil {
				return handled, obj, err
			}
			if m, merr := meta.Accessor(obj); merr == nil && m.GetDeletionTimestamp() != nil && len(m.GetFinalizers()) == 0 {
				if derr := tracker.Delete(a.GetResource(), a.GetNamespace(), m.GetName()); derr != nil {
					return true, nil, derr
				}
			}
			return handled, obj, err
		})
	}
	return client
}

// PrependReactor adds a reactor to a fake clientset that may already be in
// use: client-go's Fake.PrependReactor writes the reaction chain without
// the lock Invokes reads it under, so a reactor added while an informer,
// a controller or the event broadcaster calls the client is a data race.
func PrependReactor(client *fake.Clientset, verb, resource string, reaction clienttesting.ReactionFunc) {
	client.Lock()
	defer client.Unlock()
	client.PrependReactor(verb, resource, reaction)
}
