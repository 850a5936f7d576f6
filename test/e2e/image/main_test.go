// Package image tests the container image `make image` builds
// (hack/image/build.sh): that it is reproducible, and that its binary runs
// as the image says (uid 65532, entrypoint, environment) under runc with a
// read-only root filesystem, doing its job against a real kube-apiserver.
//
// The image's OCI layout is unpacked with umoci; each CCM process the e2e
// framework starts is this test binary re-executed as a small wrapper that
// writes a runc bundle for the arguments it was given and becomes
// `runc run`. Needs root, runc and umoci (Debian's; hack/image/install.sh).
package image

import (
	"os"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

var suite framework.Shared

func TestMain(m *testing.M) {
	if os.Getenv(envWrapper) != "" {
		os.Exit(runWrapper(os.Args[1:]))
	}
	os.Exit(suite.Run(m))
}
