package svcstate

import (
	corev1 "k8s.io/api/core/v1"
)

// NodeRef is the event reference of a Node.
func NodeRef(node *corev1.Node) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID}
}

// ServiceRef is the event reference of a Service.
func ServiceRef(svc *corev1.Service) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID}
}
