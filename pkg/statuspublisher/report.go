package statuspublisher

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// Backend is one backend's published status: the JSON value of the
// ConfigMap's data key named after the backend.
type Backend struct {
	// Type is the backend type (aws, openstack, vsphere, baremetal).
	Type string `json:"type"`
	// Health is whether the backend's cloud answers.
	Health Health `json:"health"`
	// Nodes counts the Nodes labelled multicloud-ccm.io/backend with the
	// backend's name; absent for a backend without instances.
	Nodes *int `json:"nodes,omitempty"`
	// LoadBalancers counts the Services annotated
	// multicloud-ccm.io/load-balancer-served-by with the backend's name;
	// absent for a backend without load balancers.
	LoadBalancers *int `json:"loadBalancers,omitempty"`
	// Pools is the usage of a bare-metal backend's address pools, per pool
	// and IP family.
	Pools []backends.PoolUsage `json:"pools,omitempty"`
}

// Health is a backend's health as the router's calls to it show it.
type Health struct {
	// Up is false once the last 3 calls in a row got no answer from the
	// cloud (the multicloud_ccm_backend_up gauge).
	Up bool `json:"up"`
	// LastSuccess is when a call last got an answer; absent before any.
	LastSuccess *metav1.Time `json:"lastSuccess,omitempty"`
	// LastError is the last call that got no answer (an outage, a timeout,
	// refused credentials), kept after the backend answers again.
	LastError *CallError `json:"lastError,omitempty"`
}

// CallError is a backend call that got no answer.
type CallError struct {
	// Operation is the call: InstanceExists, EnsureLoadBalancer, ...
	Operation string `json:"operation"`
	// Class is throttled, auth, not_found or other (as the
	// multicloud_ccm_backend_errors_total metric counts it).
	Class string `json:"class"`
	// Message is the error.
	Message string `json:"message"`
	// Time is when the call ended.
	Time metav1.Time `json:"time"`
}

// render returns the ConfigMap data for the backends' statuses: one key
// per backend, its Backend as indented JSON. Times are kept to the second,
// as they are serialised.
func render(sts []router.BackendStatus) (map[string]string, error) {
	data := make(map[string]string, len(sts))
	for _, st := range sts {
		out, err := json.MarshalIndent(backendOf(st), "", "  ")
		if err != nil {
			return nil, fmt.Errorf("backend %s: encoding its status: %w", st.Name, err)
		}
		data[st.Name] = string(out) + "\n"
	}
	return data, nil
}

func backendOf(st router.BackendStatus) Backend {
	b := Backend{Type: st.Type, Health: Health{Up: st.Up}, Nodes: st.Nodes, LoadBalancers: st.LoadBalancers, Pools: st.Pools}
	if !st.LastSuccess.IsZero() {
		t := metav1.NewTime(st.LastSuccess)
		b.Health.LastSuccess = &t
	}
	if e := st.LastError; e != nil {
		b.Health.LastError = &CallError{Operation: e.Operation, Class: e.Class, Message: e.Message, Time: metav1.NewTime(e.Time)}
	}
	return b
}

// NamedBackend is a published backend status with the backend's name.
type NamedBackend struct {
	Name string
	Backend
}

// Decode reads the backends' statuses from the published ConfigMap, sorted
// by name. A value that does not decode is an error naming its key.
func Decode(cm *corev1.ConfigMap) ([]NamedBackend, error) {
	out := make([]NamedBackend, 0, len(cm.Data))
	for _, name := range sortedKeys(cm.Data) {
		var b Backend
		if err := json.Unmarshal([]byte(cm.Data[name]), &b); err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s, key %s: %w", cm.Namespace, cm.Name, name, err)
		}
		out = append(out, NamedBackend{Name: name, Backend: b})
	}
	return out, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	return keys
}
