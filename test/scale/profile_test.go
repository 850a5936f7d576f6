package scale

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// SCALE_CCM_PROFILE names the phases (comma-separated: init, services,
// node sync, churn, steady) during which the benchmark records the CCM's
// CPU profile from its secure port (/debug/pprof/profile, served with
// --profiling, the upstream default, to the control plane's admin): back
// to back profiles of profileChunk each, from the phase's start until its
// end (the last chunk runs to its end), written to the cell's folder as
// ccm-cpu-<phase>-NNN.pb.gz. Read them together with
// `go tool pprof -top multicloud-ccm ccm-cpu-services-*.pb.gz`; the cell's
// table.txt gives the phase's CPU split by package (profileSplit).
const profileChunk = 10 * time.Second

func profilePhases() map[string]bool {
	out := map[string]bool{}
	for p := range strings.SplitSeq(os.Getenv("SCALE_CCM_PROFILE"), ",") {
		if p = strings.TrimSpace(p); p != "" {
			out[p] = true
		}
	}
	return out
}

// ccmProfiler records one phase's CPU profiles.
type ccmProfiler struct {
	stop  chan struct{}
	done  sync.WaitGroup
	files []string
	err   error
}

// profileCCM starts recording the CCM's CPU profile into dir as
// ccm-cpu-<phase>-NNN.pb.gz; nil when the phase is not asked for.
func profileCCM(cl *cluster, dir, phase string) *ccmProfiler {
	if !profilePhases()[phase] {
		return nil
	}
	p := &ccmProfiler{stop: make(chan struct{})}
	client := &http.Client{Timeout: profileChunk + 30*time.Second, Transport: &http.Transport{
		// The CCM's self-signed serving certificate, on loopback.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // Loopback test client.
	}}
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", cl.ccm.URL, int(profileChunk/time.Second))
	name := strings.ReplaceAll(phase, " ", "-")
	p.done.Go(func() {
		for i := 1; ; i++ {
			select {
			case <-p.stop:
				return
			default:
			}
			path := filepath.Join(dir, fmt.Sprintf("ccm-cpu-%s-%03d.pb.gz", name, i))
			if err := fetchProfile(client, url, cl.cp.AdminToken, path); err != nil {
				p.err = err
				return
			}
			p.files = append(p.files, path)
		}
	})
	return p
}

func fetchProfile(client *http.Client, url, token, path string) error {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	f, err := os.Create(path) //nolint:gosec // The cell's own folder.
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// end waits for the chunk in flight and returns the profiles written.
func (p *ccmProfiler) end() ([]string, error) {
	if p == nil {
		return nil, nil
	}
	close(p.stop)
	p.done.Wait()
	return p.files, p.err
}

// profileClasses name, by function-name prefix, the parts of the CCM a
// CPU sample is charged to. A sample goes to the class of the frame
// nearest its leaf that has one (profileClass): the runtime's allocation
// and the standard library's sorting go to the package that called them,
// the JSON decoding client-go asks for to JSON, and a stack with no class
// at all (the garbage collector's workers, the scheduler) to "runtime".
var profileClasses = []struct{ prefix, class string }{
	{"github.com/multicloud-ccm/multicloud-ccm/pkg/router", "router"},
	{"github.com/multicloud-ccm/multicloud-ccm/pkg/lbcontroller", "lbcontroller"},
	{"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/aws", "aws backend"},
	{"github.com/multicloud-ccm/multicloud-ccm/", "multicloud-ccm, other"},
	{"github.com/aws/", "AWS SDK"},
	{"encoding/json.", "JSON"},
	{"sigs.k8s.io/json", "JSON"},
	{"github.com/json-iterator/", "JSON"},
	{"k8s.io/apimachinery/pkg/runtime/serializer/json", "JSON"},
	{"k8s.io/apimachinery/pkg/runtime/serializer/protobuf", "protobuf"},
	{"github.com/gogo/protobuf", "protobuf"},
	{"google.golang.org/protobuf", "protobuf"},
	{"k8s.io/api/", "protobuf"}, // the API types' generated Unmarshal and Marshal (DeepCopy: "deep copies")
	{"k8s.io/client-go/", "client-go"},
	{"k8s.io/apimachinery/", "apimachinery"},
	{"k8s.io/klog", "logging"},
	{"k8s.io/component-base/logs", "logging"},
	{"k8s.io/cloud-provider", "upstream controllers"},
	{"k8s.io/controller-manager", "upstream controllers"},
	{"k8s.io/apiserver", "secure port (apiserver lib)"},
	{"net/http.", "HTTP/TLS"},
	{"net.", "HTTP/TLS"},
	{"crypto/", "HTTP/TLS"},
	{"golang.org/x/net/http2", "HTTP/TLS"},
	{"compress/", "HTTP/TLS"},
	{"syscall.", "syscalls"},
	{"internal/poll.", "syscalls"},
}

// profileClass is the class of a sample's stack, leaf first.
func profileClass(stack []string) string {
	for _, fn := range stack {
		if strings.Contains(fn, ".DeepCopy") {
			return "deep copies"
		}
		for _, c := range profileClasses {
			if strings.HasPrefix(fn, c.prefix) {
				return c.class
			}
		}
	}
	return "runtime"
}

// profileSample is one stack of a profile and its CPU time.
type profileSample struct {
	cpu   time.Duration
	stack []string // leaf first
}

// readTraces parses `go tool pprof -traces` output: blocks separated by
// dashed lines, each a value and the leaf function on its first line and
// one caller per line after it.
func readTraces(r io.Reader) ([]profileSample, error) {
	var out []profileSample
	var cur *profileSample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-----------+") {
			cur = nil
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if line[0] != ' ' || cur == nil && len(f) < 2 {
			continue // the header (File:, Type:, ...)
		}
		if cur == nil {
			d, err := time.ParseDuration(f[0])
			if err != nil {
				continue // a label line
			}
			out = append(out, profileSample{cpu: d, stack: []string{f[1]}})
			cur = &out[len(out)-1]
			continue
		}
		cur.stack = append(cur.stack, f[0])
	}
	return out, sc.Err()
}

// profileSplit reads the profiles with `go tool pprof -traces` and
// returns the CPU by class and the total, and the CPU of the samples
// whose stack passes through each of the product's packages (inclusive:
// the aws backend's includes the SDK it calls).
func profileSplit(files []string) (map[string]time.Duration, map[string]time.Duration, time.Duration, error) {
	if len(files) == 0 {
		return nil, nil, 0, fmt.Errorf("no profile")
	}
	args := append([]string{"tool", "pprof", "-traces", "-sample_index=cpu"}, files...)
	raw, err := exec.Command("go", args...).Output() //nolint:gosec // The benchmark's own profiles.
	if err != nil {
		return nil, nil, 0, fmt.Errorf("go tool pprof -traces: %w", err)
	}
	samples, err := readTraces(strings.NewReader(string(raw)))
	if err != nil {
		return nil, nil, 0, err
	}
	return splitSamples(samples)
}

// inclusiveClasses are the packages profileSplit also gives inclusively.
var inclusiveClasses = []struct{ prefix, name string }{
	{"github.com/multicloud-ccm/multicloud-ccm/pkg/lbcontroller", "lbcontroller and below"},
	{"github.com/multicloud-ccm/multicloud-ccm/pkg/router", "router and below"},
	{"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/aws", "aws backend and below"},
	{"github.com/aws/", "AWS SDK and below"},
	{"k8s.io/client-go/tools/cache", "informers and below"},
}

func splitSamples(samples []profileSample) (map[string]time.Duration, map[string]time.Duration, time.Duration, error) {
	by, incl := map[string]time.Duration{}, map[string]time.Duration{}
	var total time.Duration
	for _, s := range samples {
		total += s.cpu
		by[profileClass(s.stack)] += s.cpu
		for _, c := range inclusiveClasses {
			if slices.ContainsFunc(s.stack, func(fn string) bool { return strings.HasPrefix(fn, c.prefix) }) {
				incl[c.name] += s.cpu
			}
		}
	}
	return by, incl, total, nil
}

// formatSplit prints a split per Service: each class's share of the
// profile applied to the phase's CPU seconds (from /proc, the profiles'
// chunks may run past the phase's end), divided by n.
func formatSplit(by, incl map[string]time.Duration, total time.Duration, phaseCPU float64, n int) string {
	if total == 0 || n == 0 {
		return "no samples"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "profiled %.1f s of CPU; the phase's %.1f s over %d: %.2f ms each\n", total.Seconds(), phaseCPU, n, phaseCPU*1000/float64(n))
	line := func(m map[string]time.Duration) {
		keys := slices.Collect(maps.Keys(m))
		slices.SortFunc(keys, func(a, c string) int { return int(m[c] - m[a]) })
		for _, k := range keys {
			share := float64(m[k]) / float64(total)
			fmt.Fprintf(&b, "  %-28s %5.1f %%  %7.2f ms each\n", k, 100*share, share*phaseCPU*1000/float64(n))
		}
	}
	b.WriteString(" by package (the frame nearest the leaf with one):\n")
	line(by)
	b.WriteString(" inclusive:\n")
	line(incl)
	return b.String()
}
