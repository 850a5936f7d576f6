package scale

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// retuneBudget rewrites the CCM's cloud-config with the aws section's
// rateLimits line (a live reload, as an operator's edit of the mounted
// ConfigMap) and waits until the CCM applied it as a retune of the aws
// backend in place ("retuned" in its "Applied the changed cloud-config"
// line; a rebuild would drop the backend's verified views and re-sync
// every Service). It returns that line.
func retuneBudget(_ context.Context, t *testing.T, cl *cluster, rateLimits string) string {
	t.Helper()
	off := fileSize(cl.ccm.LogPath())
	tmp := cl.ccm.CloudConfigPath + ".new"
	if err := os.WriteFile(tmp, []byte(cl.cloudConfigWith(rateLimits)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, cl.ccm.CloudConfigPath); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		if line := findLine(cl.ccm.LogPath(), off, "Applied the changed cloud-config"); line != "" {
			if !strings.Contains(line, `retuned=["aws"]`) || !strings.Contains(line, "rebuilt=null") {
				t.Fatalf("the budget's reload was not a retune in place: %s", line)
			}
			return line
		}
		if line := findLine(cl.ccm.LogPath(), off, "cloud-config"); strings.Contains(line, "ailed") {
			t.Fatalf("the budget's reload failed: %s", line)
		}
	}
	t.Fatalf("the CCM did not apply the changed cloud-config within a minute:\n%s", cl.ccm.Logs(20))
	return ""
}

// findLine returns the first line of the file after offset from that
// contains text, or "".
func findLine(path string, from int64, text string) string {
	f, err := os.Open(path) //nolint:gosec // The CCM's log, in the run's folder.
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return ""
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), text) {
			return sc.Text()
		}
	}
	return ""
}

// budgetWaits reads the CCM's multicloud_ccm_cloud_api_budget_wait_seconds_total
// by api: the time its requests waited for the client-side budget.
func budgetWaits(ctx context.Context, t *testing.T, cl *cluster) map[string]float64 {
	t.Helper()
	code, body, err := cl.ccm.Get(ctx, "/metrics")
	if err != nil || code != 200 {
		t.Logf("metrics: %d %v", code, err)
		return nil
	}
	out := map[string]float64{}
	for line := range strings.SplitSeq(string(body), "\n") {
		if !strings.HasPrefix(line, "multicloud_ccm_cloud_api_budget_wait_seconds_total{") {
			continue
		}
		_, rest, _ := strings.Cut(line, `api="`)
		api, _, _ := strings.Cut(rest, `"`)
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			out[api] += v
		}
	}
	return out
}

func waitsSince(before, after map[string]float64) string {
	var parts []string
	for _, api := range []string{"ec2", "elbv2"} {
		parts = append(parts, fmt.Sprintf("%s %.1f s", api, after[api]-before[api]))
	}
	return strings.Join(parts, ", ")
}
