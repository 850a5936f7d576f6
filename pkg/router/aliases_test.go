package router

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

type (
	typesNodeName = types.NodeName
)

type runtimeObject = runtime.Object

func objects[T runtime.Object](in []T) []runtime.Object {
	out := make([]runtime.Object, 0, len(in))
	for _, o := range in {
		out = append(out, o)
	}
	return out
}
