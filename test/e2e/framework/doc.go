// Package framework runs multicloud-ccm end to end against a real control
// plane: it starts etcd and kube-apiserver on free loopback ports in a
// temporary folder, writes kubeconfigs (an admin one with a static token in
// system:masters, and one per ServiceAccount on request), starts and stops
// the multicloud-ccm binary with a given cloud-config and flags, and offers
// helpers to create Nodes the way a kubelet would, create Services, wait for
// conditions by polling, and read Events.
//
// Binaries are found through environment variables, with defaults under
// the repository's _output/bin (see Binaries). Every process writes its log
// to a file in the run's folder; LogTail prints the end of it when a test
// fails.
//
// Typical use from a test package:
//
//	func TestMain(m *testing.M) { os.Exit(framework.RunMain(m, setup)) }
//
// or, from a single test:
//
//	cp := framework.StartControlPlaneT(t)
//	ccm := cp.StartCCMT(t, framework.CCMOptions{CloudConfig: cfg})
package framework
