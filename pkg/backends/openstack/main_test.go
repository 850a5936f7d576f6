package openstack

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// realStackParallel is how many tests marked t.Parallel run at once in this
// package unless -parallel is given. The tests on the real stack spend
// their time waiting on Octavia, Neutron and Nova (a load balancer takes
// seconds to become ACTIVE after every change), not on the CPU; go test's
// default (GOMAXPROCS, 2 on CI's machines) would leave them mostly
// serial. Each parallel test owns what it touches (a cluster ID, Service
// names, its own Neutron topology, a backend name of its own for the API
// call counters): see docs/testing.md. Not more: the test stack's Octavia
// API has two workers, and with eight tests at once on a loaded 2-core
// machine they only made each test slower (one convergence wait ran out).
const realStackParallel = 4

// TestMain raises -test.parallel for this package only (other packages'
// parallel tests are CPU-bound and keep go test's default).
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(realStackParallel)); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
