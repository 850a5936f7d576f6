// Package chaos is the chaos judge: a seeded generator draws a sequence of
// operations on Services, Nodes, the live configuration and the clouds
// (faults included), runs it against the built multicloud-ccm binary (two
// replicas under leader election) on a real kube-apiserver and etcd, with
// bare metal (two backends, each with its pool), the AWS wire fake
// (internal/awsfake), vcsim and, when the OpenStack stack is up, a backend
// os on the real Keystone, Octavia and Nova (openstack.go), each replica
// reaching kube-apiserver through a proxy that can hold back or cut its
// watches (watchproxy.go), and checks invariants after every step and at
// quiescence. On a violation it prints the seed, shrinks the sequence to
// the fewest steps that still fail (delta debugging), writes it as a
// replay file and prints the command that replays it; the run's logs are
// kept.
//
// make chaos runs TestChaos (SEED, STEPS, DURATION, REPLAY pick the run);
// TestChaosSlice, a few fixed seeds and one fresh one drawn from the tree
// under test (treeseed.go), runs under make test. docs/testing.md
// describes the operations and the invariants.
//
// The sequence is a value: every operation on a Service carries the
// Service's whole shape, every reload the whole configuration, so any
// subsequence the shrinker keeps is a sequence the judge can run and judge
// (operations that no longer apply do nothing).
package chaos
