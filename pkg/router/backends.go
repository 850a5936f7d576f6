package router

// The backend types compiled into the provider. Each registers its type and
// config section from init.
import (
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal" // type baremetal.
)
