package scale

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// logKeys are the CCM log messages the benchmark counts: the node syncs of
// upstream's service controller and of multicloud-ccm's own, and the
// router's re-syncs (pkg/router/nodesync.go), the loop the churn measures.
var logKeys = []struct{ name, text string }{
	// Upstream's service controller (when it serves Services).
	{"node syncs", "Syncing backends for all LB services"},
	{"LB host updates", "Updating backends for load balancer"},
	// multicloud-ccm's own load-balancer controller (pkg/lbcontroller).
	{"target updates", "Updated the load balancer's targets"},
	{"address re-targets", "Re-targeted load balancer after a node address change"},
	{"stale-list re-syncs", "Load balancer was handed a stale node list"},
	{"ensures", "Ensuring load balancer"},
}

// phase is what one step of a run cost the CCM.
type phase struct {
	name     string
	dur      time.Duration
	cpu      float64 // CCM CPU seconds
	rssMiB   float64 // at the phase's end
	logLines int
	logBytes int64
	keys     map[string]int
	// perService counts, for the logKeys naming a Service (perServiceKeys),
	// the lines of each Service: logKeys name -> Service name -> lines.
	perService map[string]map[string]int
	api        map[string]int // "user verb resource" -> requests
	apiTotal   int
	cloud      map[string]int // action -> calls
	cloudAll   int
	// buckets are the cloud calls by the AWS bucket they take a token
	// from (awsfake's BucketCalls); throttled the requests the fake's
	// buckets refused (SCALE_AWS_THROTTLE).
	buckets   map[string]int
	throttled int
}

// perMinute scales n over the phase's duration.
func (p phase) perMinute(n int) float64 { return float64(n) / p.dur.Minutes() }

// probe reads, between begin and end, the CCM's CPU time and log, the
// audit log and the cloud fake's call counts.
type probe struct {
	cl        *cluster
	start     time.Time
	cpu       float64
	logOff    int64
	auditOff  int64
	cloudSeen map[string]int
	// bucketsSeen and throttledSeen are the fake's BucketCalls and
	// Throttled at begin.
	bucketsSeen   map[string]int
	throttledSeen int
}

func newProbe(cl *cluster) *probe { return &probe{cl: cl} }

func (p *probe) begin() {
	p.start = time.Now()
	p.cpu = cpuSeconds(p.cl.ccm.PID())
	p.logOff = fileSize(p.cl.ccm.LogPath())
	p.auditOff = fileSize(p.cl.audit)
	if p.cl.fake != nil {
		p.cloudSeen = p.cl.fake.CallCounts()
		p.bucketsSeen = p.cl.fake.BucketCalls()
		p.throttledSeen = p.cl.fake.Throttled()
	}
}

// end returns the phase since begin. The audit log is written in batches:
// it waits a moment for the last one.
func (p *probe) end(name string) phase {
	ph := phase{name: name, dur: time.Since(p.start), cpu: cpuSeconds(p.cl.ccm.PID()) - p.cpu, rssMiB: rssMiB(p.cl.ccm.PID())}
	logEnd := fileSize(p.cl.ccm.LogPath())
	ph.logLines, ph.keys, ph.perService = countLog(p.cl.ccm.LogPath(), p.logOff, logEnd)
	ph.logBytes = logEnd - p.logOff
	time.Sleep(2 * time.Second)
	ph.api = countAudit(p.cl.audit, p.auditOff, fileSize(p.cl.audit), p.start, p.start.Add(ph.dur))
	for _, v := range ph.api {
		ph.apiTotal += v
	}
	if p.cl.fake != nil {
		ph.cloud = map[string]int{}
		for k, v := range p.cl.fake.CallCounts() {
			if d := v - p.cloudSeen[k]; d > 0 {
				ph.cloud[k] = d
				ph.cloudAll += d
			}
		}
		ph.buckets = map[string]int{}
		for k, v := range p.cl.fake.BucketCalls() {
			if d := v - p.bucketsSeen[k]; d > 0 {
				ph.buckets[k] = d
			}
		}
		ph.throttled = p.cl.fake.Throttled() - p.throttledSeen
	}
	return ph
}

// cpuSeconds is the process's user+system CPU time (/proc/<pid>/stat).
func cpuSeconds(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command's closing parenthesis: state is field 3,
	// utime 14 and stime 15.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100 // USER_HZ is 100 on Linux
}

// rssMiB is the process's resident set (VmRSS) in MiB.
func rssMiB(pid int) float64 { return procStatusKiB(pid, "VmRSS:") / 1024 }

// peakRSSMiB is the process's peak resident set (VmHWM) in MiB.
func peakRSSMiB(pid int) float64 { return procStatusKiB(pid, "VmHWM:") / 1024 }

func procStatusKiB(pid int, field string) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kib, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kib
		}
	}
	return 0
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// section opens path and returns a reader of bytes [from, to).
func section(path string, from, to int64) (io.Reader, func(), error) {
	f, err := os.Open(path) //nolint:gosec // The benchmark's own log files.
	if err != nil {
		return nil, func() {}, err
	}
	return io.NewSectionReader(f, from, to-from), func() { _ = f.Close() }, nil
}

// perServiceKeys are the logKeys counted per Service too: how often each
// load balancer was updated, to tell one update per batch from one per
// node.
var perServiceKeys = []string{"target updates", "address re-targets"}

// countLog counts the lines of the CCM's log in [from, to), the lines
// carrying each of logKeys, and those of perServiceKeys by Service.
func countLog(path string, from, to int64) (int, map[string]int, map[string]map[string]int) {
	keys, perService := map[string]int{}, map[string]map[string]int{}
	r, done, err := section(path, from, to)
	defer done()
	if err != nil {
		return 0, keys, perService
	}
	lines := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		lines++
		line := sc.Text()
		for _, k := range logKeys {
			if !strings.Contains(line, k.text) {
				continue
			}
			keys[k.name]++
			if _, rest, ok := strings.Cut(line, `service="`+svcNS+`/`); ok && slices.Contains(perServiceKeys, k.name) {
				name, _, _ := strings.Cut(rest, `"`)
				if perService[k.name] == nil {
					perService[k.name] = map[string]int{}
				}
				perService[k.name][name]++
			}
		}
	}
	return lines, keys, perService
}

// perLB is how many of the cell's Services' load balancers had each count
// of lines of a perServiceKeys key in a phase: "n×k" for n load balancers
// with k, by k (0 included).
func perLB(p phase, key string, services int) string {
	byCount := map[int]int{0: services - len(p.perService[key])}
	for _, n := range p.perService[key] {
		byCount[n]++
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(byCount)) {
		if byCount[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d×%d", byCount[k], k))
		}
	}
	return strings.Join(parts, ", ")
}

// auditEvent holds the audit fields the benchmark reads.
type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// countAudit counts the CCM's requests received in [start, end) by
// "controller verb resource[/subresource]" (watch requests are counted as
// they start).
func countAudit(path string, from, to int64, start, end time.Time) map[string]int {
	out := map[string]int{}
	r, done, err := section(path, from, to)
	defer done()
	if err != nil {
		return out
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		if ev.RequestReceivedTimestamp.Before(start) || !ev.RequestReceivedTimestamp.Before(end) {
			continue
		}
		user := strings.TrimPrefix(ev.User.Username, "system:serviceaccount:kube-system:")
		res := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			res += "/" + ev.ObjectRef.Subresource
		}
		out[user+" "+ev.Verb+" "+res]++
	}
	return out
}

// top returns the n largest entries of m as "key n" strings.
func top(m map[string]int, n int) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	if len(keys) > n {
		keys = keys[:n]
	}
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// percentile returns the p-th percentile (0..100) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}
