package openstack

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// ownProcessEnv names the test a child process of the test binary runs
// (inOwnProcess).
const ownProcessEnv = "MCCM_OPENSTACK_TEST_OWN_PROCESS"

// inOwnProcess runs the calling test in a child process of the test binary
// (the same binary: -race and all), side by side with the package's other
// tests, and reports true in this process, where the test then returns;
// in the child, which runs this test alone, it reports false and the test
// runs there. For the tests that set what is the process's (the mutation
// gate, the takeover clock, a backend name's API call counters): in this
// process they would change what every other test sees, so they ran alone,
// one after the other, before the parallel tests started; each waits on
// Octavia for most of its time (TestLostCreateAcrossTakeover sits out the
// 75 s takeover window), and those waits were the package's serial part
// (issue 44). The child's output is this test's log, line by line; the
// child failing (a failed test, a panic, a data race) fails it. Call it
// after the test's own skip for a missing stack, so that a skip is this
// process's.
func inOwnProcess(t *testing.T) bool {
	t.Helper()
	if os.Getenv(ownProcessEnv) == t.Name() {
		return false
	}
	t.Parallel()
	args := []string{"-test.run=^" + regexp.QuoteMeta(t.Name()) + "$", "-test.v", "-test.count=1"}
	if d, ok := t.Deadline(); ok {
		// The child times out (with its goroutines' stacks) before this
		// process does.
		if left := time.Until(d) - 10*time.Second; left > 0 {
			args = append(args, "-test.timeout="+left.String())
		}
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), ownProcessEnv+"="+t.Name())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s in its own process: %v", t.Name(), err)
	}
	var wg sync.WaitGroup
	skipped := false
	wg.Go(func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "--- SKIP: "+t.Name()+" ") {
				skipped = true
			}
			// A prefix, so that go test -json does not read the
			// child's own "--- PASS" lines as this process's.
			t.Log("own process: " + line)
		}
	})
	wg.Wait()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s in its own process: %v (its output above)", t.Name(), err)
	}
	if skipped {
		t.Skip("skipped in its own process (its output above)")
	}
	return true
}
