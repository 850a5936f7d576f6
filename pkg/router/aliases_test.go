package router

import (
	"k8s.io/apimachinery/pkg/types"
)

type (
	typesNodeName = types.NodeName
)
