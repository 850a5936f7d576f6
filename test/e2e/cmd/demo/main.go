// Command demo runs multicloud-ccm on this machine against a real
// kube-apiserver and etcd: it starts the control plane on loopback, two
// simulated clouds in its own process (a vCenter: govmomi's simulator; AWS:
// the EC2/ELBv2 wire-protocol fake), the CCM with three backends (bare
// metal, vSphere, AWS), creates Nodes (as kubelets would) and LoadBalancer
// Services, waits until the CCM has handled them, prints what it did, and
// keeps everything running for kubectl until Ctrl-C.
//
// It builds nothing: `make demo` builds the binaries first. They are found
// like the e2e tests find them (MULTICLOUD_CCM_BIN, KUBE_APISERVER_BIN,
// ETCD_BIN, KUBECTL_BIN, default _output/bin).
//
// Usage:
//
//	go run ./test/e2e/cmd/demo [-once] [-timeout 90s]
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

func main() {
	var opts options
	flag.BoolVar(&opts.once, "once", false, "print the tables and exit instead of running until interrupted")
	flag.DurationVar(&opts.timeout, "timeout", 90*time.Second, "how long to wait for the CCM to handle every object")
	flag.Parse()
	opts.out = os.Stdout

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

type options struct {
	once    bool
	timeout time.Duration
	out     io.Writer
}

// run starts everything, prints the result and, unless once, waits for
// ctx to end. It always stops what it started.
func run(ctx context.Context, o options) (err error) {
	bins, err := framework.FindBinaries()
	if err == nil {
		err = bins.Check(bins.All())
	}
	if err != nil {
		return errors.New(framework.MissingBinariesMessage(err))
	}
	fmt.Fprintln(o.out, "Starting etcd and kube-apiserver on loopback ...")
	cp, err := framework.StartControlPlane(ctx, framework.ControlPlaneOptions{Binaries: bins})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopAll(o.out, cp, err != nil)) }()

	fmt.Fprintln(o.out, "Starting the simulated clouds: a vCenter (govmomi simulator) and AWS (EC2/ELBv2 fake) ...")
	c, err := startClouds(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, c.close()) }()

	fmt.Fprintf(o.out, "Starting multicloud-ccm with backends %s (bare metal), %s (vSphere), %s (AWS) ...\n", metalBackend, vsphereBackend, awsBackend)
	cfg, err := secretFiles(c.cloudConfig(), filepath.Join(cp.Dir, "demo-secrets"), c.env())
	if err != nil {
		return err
	}
	ccm, err := cp.StartCCM(ctx, framework.CCMOptions{Name: "multicloud-ccm", CloudConfig: cfg})
	if err != nil {
		return err
	}
	defer func() {
		if serr := ccm.Stop(15 * time.Second); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	if err := createObjects(ctx, cp, c); err != nil {
		return err
	}
	settleErr := waitSettled(ctx, cp, c, o.timeout)
	if err := printTables(ctx, o.out, cp, c); err != nil {
		return err
	}
	if settleErr != nil {
		fmt.Fprintf(o.out, "\nThe CCM's log: %s\n", ccm.LogPath())
		return settleErr
	}
	showPlan(ctx, o.out, cp, ccm)
	printUsage(o.out, cp, ccm)
	if o.once {
		return nil
	}
	return waitForInterrupt(ctx, o.out, ccm)
}

func waitForInterrupt(ctx context.Context, out io.Writer, ccm *framework.CCM) error {
	fmt.Fprintln(out, "\nRunning. Press Ctrl-C to stop and clean up.")
	select {
	case <-ctx.Done():
		fmt.Fprintln(out, "\nStopping ...")
		return nil
	case <-ccm.Done():
		_, werr := ccm.Exited()
		return fmt.Errorf("multicloud-ccm exited (%w); its log: %s", werr, ccm.LogPath())
	}
}

func stopAll(out io.Writer, cp *framework.ControlPlane, failed bool) error {
	if failed {
		fmt.Fprintf(out, "Files (logs, kubeconfig) kept in %s\n", cp.Dir)
	}
	return cp.Stop(failed)
}

func printUsage(out io.Writer, cp *framework.ControlPlane, ccm *framework.CCM) {
	fmt.Fprintf(out, `
Try it with kubectl:
  export KUBECONFIG=%s
  %s get nodes -L topology.kubernetes.io/zone,multicloud-ccm.io/backend
  %s get services -o wide
  %s get events -A --sort-by=.lastTimestamp

See what multicloud-ccm would do if it started now (here: nothing, 0 changes;
change a Service's annotations and run it again):
  %s
  (docs/plan.md)

multicloud-ccm log: %s
`, cp.AdminKubeconfig, cp.Binaries.Kubectl, cp.Binaries.Kubectl, cp.Binaries.Kubectl, strings.Join(planCommand(cp, ccm), " "), ccm.LogPath())
}

// showPlan runs the plan command the demo prints, as a user without the
// demo's environment would (no credentials in variables), and prints its
// output: with everything handled, it plans nothing (0 changes, exit 0;
// TestDemoOnce checks it). A plan that fails is printed with its exit
// status and log, and the demo goes on.
func showPlan(ctx context.Context, out io.Writer, cp *framework.ControlPlane, ccm *framework.CCM) {
	args := planCommand(cp, ccm)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...) //nolint:gosec // the demo's own binary and files.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + cp.Dir}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	fmt.Fprintf(out, "\n$ %s\n%s", strings.Join(args, " "), stdout.String())
	if err != nil {
		fmt.Fprintf(out, "plan: %v\n%s", err, stderr.String())
	}
}

// planCommand is the `multicloud-ccm plan` command the demo prints: the
// CCM's own cloud-config (its secrets in files) and the admin kubeconfig.
func planCommand(cp *framework.ControlPlane, ccm *framework.CCM) []string {
	return []string{cp.Binaries.CCM, "plan", "--cloud-config", ccm.CloudConfigPath, "--kubeconfig", cp.AdminKubeconfig}
}
