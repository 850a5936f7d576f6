package backends

import (
	corev1 "k8s.io/api/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// EventComponent is the source component of every event multicloud-ccm
// records, the router's and the backends' alike, and the name its
// Kubernetes clients are built under.
const EventComponent = "multicloud-ccm"

// NewEventRecorder starts an event recorder writing to client until stop
// closes.
func NewEventRecorder(client clientset.Interface, stop <-chan struct{}) record.EventRecorder {
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	go func() {
		<-stop
		broadcaster.Shutdown()
	}()
	return broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: EventComponent})
}
