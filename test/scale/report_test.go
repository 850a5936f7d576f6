package scale

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
)

// table prints one column per cell and one row per figure.
func table(rs []*result) string {
	rows := []struct {
		name string
		val  func(r *result) string
	}{
		{"nodes initialised (s)", func(r *result) string { return secs(r.initTime) }},
		{"  per node (ms)", func(r *result) string {
			return fmt.Sprintf("%.1f", float64(r.initTime.Milliseconds())/float64(r.cell.nodes))
		}},
		{"Service time-to-address p50 (s)", func(r *result) string { return secs(r.addrP50) }},
		{"Service time-to-address p99 (s)", func(r *result) string { return secs(r.addrP99) }},
		{"all Services addressed (s)", func(r *result) string { return secs(r.addr) }},
		{"  the least AWS's buckets allow their calls (s, busiest bucket)", func(r *result) string {
			p := r.phase("services")
			if p.buckets == nil {
				return "-"
			}
			least, by := awsfake.AWSRateLimits.Least(p.buckets)
			return fmt.Sprintf("%s (%s: %d)", secs(least), by, p.buckets[by])
		}},
		{"  requests the fake's AWS buckets throttled", func(r *result) string {
			if !awsThrottle() || r.cell.cloud != "aws" {
				return "off"
			}
			return fmt.Sprint(r.phase("services").throttled)
		}},
		{"node sync: 1 node excluded → all LBs updated (s)", func(r *result) string {
			if r.syncOf == 0 {
				return fmt.Sprintf("none to update (%d updated)", r.syncDone)
			}
			if r.syncDone < r.syncOf {
				return fmt.Sprintf(">%s (%d/%d)", secs(r.syncLatency), r.syncDone, r.syncOf)
			}
			return secs(r.syncLatency)
		}},
		{"  budget switched before it by a live reload", func(r *result) string {
			if r.retuned == "" {
				return "no"
			}
			return "yes"
		}},
		{"  its requests' waits for the budget", func(r *result) string { return r.syncWaits }},
		{"  cloud calls / per LB", func(r *result) string {
			p := r.phase("node sync")
			if r.syncOf == 0 {
				return cloud(r, p.cloudAll)
			}
			return fmt.Sprintf("%s / %.2f", cloud(r, p.cloudAll), float64(p.cloudAll)/float64(r.syncOf))
		}},
		{"  log lines / API requests", func(r *result) string {
			p := r.phase("node sync")
			return fmt.Sprintf("%d / %d", p.logLines, p.apiTotal)
		}},
		{"  UpdatedLoadBalancer events seen", func(r *result) string { return fmt.Sprint(r.syncEvents) }},
		{"  target updates (ours) / upstream LB host updates", func(r *result) string {
			p := r.phase("node sync")
			return fmt.Sprintf("%d / %d", p.keys["target updates"], p.keys["LB host updates"])
		}},
		{"  re-targets / stale-list re-syncs", func(r *result) string {
			p := r.phase("node sync")
			return fmt.Sprintf("%d / %d", p.keys["address re-targets"], p.keys["stale-list re-syncs"])
		}},
		{"churn: nodes replaced", func(r *result) string { return fmt.Sprint(r.churned) }},
		{"  re-initialised (s)", func(r *result) string { return secs(r.churnInit) }},
		{"  CCM quiet again (s)", func(r *result) string { return secs(r.churnSettle) }},
		{"  target groups wrong then / all right (s)", func(r *result) string {
			switch {
			case r.cell.cloud != "aws" || r.cell.ipTargets:
				return "–"
			case r.churnRight < 0:
				return fmt.Sprintf("%d / not within the bound", r.churnWrong)
			}
			return fmt.Sprintf("%d / %s", r.churnWrong, secs(r.churnRight))
		}},
		{"  CPU (s)", func(r *result) string { return fmt.Sprintf("%.1f", r.phase("churn").cpu) }},
		{"  log lines (MB)", func(r *result) string {
			p := r.phase("churn")
			return fmt.Sprintf("%d (%.1f)", p.logLines, float64(p.logBytes)/1e6)
		}},
		{"  target updates (ours) / upstream LB host updates", func(r *result) string {
			p := r.phase("churn")
			return fmt.Sprintf("%d / %d", p.keys["target updates"], p.keys["LB host updates"])
		}},
		{"  re-targets / stale-list re-syncs", func(r *result) string {
			p := r.phase("churn")
			return fmt.Sprintf("%d / %d", p.keys["address re-targets"], p.keys["stale-list re-syncs"])
		}},
		{"  per LB: LBs×target updates", func(r *result) string { return perLB(r.phase("churn"), "target updates", r.cell.services) }},
		{"  per LB: LBs×re-targets", func(r *result) string { return perLB(r.phase("churn"), "address re-targets", r.cell.services) }},
		{"  API requests", func(r *result) string { return fmt.Sprint(r.phase("churn").apiTotal) }},
		{"  per Service: log lines / API requests", func(r *result) string {
			p := r.phase("churn")
			return fmt.Sprintf("%.1f / %.1f", float64(p.logLines)/float64(r.cell.services), float64(p.apiTotal)/float64(r.cell.services))
		}},
		{"  cloud API calls", func(r *result) string { return cloud(r, r.phase("churn").cloudAll) }},
		{"steady: CPU (% of a core)", func(r *result) string {
			p := r.phase("steady")
			return fmt.Sprintf("%.1f", 100*p.cpu/p.dur.Seconds())
		}},
		{"  log lines / min", func(r *result) string { p := r.phase("steady"); return fmt.Sprintf("%.0f", p.perMinute(p.logLines)) }},
		{"  API requests / min", func(r *result) string { p := r.phase("steady"); return fmt.Sprintf("%.0f", p.perMinute(p.apiTotal)) }},
		{"  cloud API calls / min", func(r *result) string {
			p := r.phase("steady")
			return cloud(r, int(p.perMinute(p.cloudAll)))
		}},
		{"RSS after init / services / steady (MiB)", func(r *result) string {
			return fmt.Sprintf("%.0f / %.0f / %.0f", r.phase("init").rssMiB, r.phase("services").rssMiB, r.phase("steady").rssMiB)
		}},
		{"  peak RSS (MiB)", func(r *result) string { return fmt.Sprintf("%.0f", r.peakRSS) }},
		{"init: CPU (s) / API requests / log lines", func(r *result) string {
			p := r.phase("init")
			return fmt.Sprintf("%.1f / %d / %d", p.cpu, p.apiTotal, p.logLines)
		}},
		{"services: CPU (s) / API requests / log lines", func(r *result) string {
			p := r.phase("services")
			return fmt.Sprintf("%.1f / %d / %d", p.cpu, p.apiTotal, p.logLines)
		}},
		{"machine load (1/5/15 min) at the end", func(r *result) string { return r.load }},
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprint(w, "figure")
	for _, r := range rs {
		fmt.Fprintf(w, "\t%s", r.cell)
	}
	fmt.Fprintln(w)
	for _, row := range rows {
		fmt.Fprint(w, row.name)
		for _, r := range rs {
			fmt.Fprintf(w, "\t%s", row.val(r))
		}
		fmt.Fprintln(w)
	}
	_ = w.Flush()
	return b.String()
}

func cloud(r *result, n int) string {
	if r.cell.cloud == "baremetal" {
		return "-"
	}
	return fmt.Sprint(n)
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f", d.Seconds()) }

// describe is one line per phase for the log.
func describe(p phase) string {
	return fmt.Sprintf("%v, CPU %.1fs, RSS %.0f MiB, %d log lines %v, %d API requests, %d cloud calls",
		p.dur.Round(100*time.Millisecond), p.cpu, p.rssMiB, p.logLines, p.keys, p.apiTotal, p.cloudAll)
}

// details lists, per phase, what the CCM did: log counts, its API requests
// by controller, verb and resource, cloud calls, and the Node changes seen.
func details(r *result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "== %s\n", r.cell)
	for _, p := range r.phases {
		fmt.Fprintf(&b, "%s: %s\n", p.name, describe(p))
		fmt.Fprintf(&b, "  API: %s\n", top(p.api, 12))
		if p.cloud != nil {
			fmt.Fprintf(&b, "  cloud: %s\n", top(p.cloud, 10))
		}
		fmt.Fprintf(&b, "  Node changes seen: %s\n", top(r.nodeChanges[p.name], 10))
		if s, ok := r.profiles[p.name]; ok {
			fmt.Fprintf(&b, "  CCM CPU by package: %s", s)
		}
	}
	return b.String()
}
