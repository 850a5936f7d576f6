// Package reload is the end-to-end suite for live configuration: the built
// multicloud-ccm binary against a real kube-apiserver and etcd, its
// cloud-config and credential files mounted the way the kubelet mounts a
// Secret (files behind a ..data symlink swapped atomically), with an aws
// backend against the awsfake wire fake and a bare-metal backend.
package reload

import (
	"os"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

var suite framework.Shared

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }
