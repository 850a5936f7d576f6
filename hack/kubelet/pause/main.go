// Command pause is the pod sandbox's process for the real-node tests
// (test/e2e/node): it holds the pod's namespaces until it is told to stop,
// reaping any child that ends, like Kubernetes' pause. Public registries
// cannot be reached on the test machines, so the image is built locally
// (hack/kubelet/build.sh, hack/image/pause.sh).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		_, _ = os.Stdout.WriteString("pause (multicloud-ccm test build)\n")
		return
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		reap()
	}
}

// reap collects every child that has ended.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
