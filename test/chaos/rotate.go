package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// hashMetric is the configuration's hash in use on a replica: it changes
// when the replica applies a change of the cloud-config or of a file it
// references (a secret file among them).
const hashMetric = "multicloud_ccm_config_hash"

// rotateGrace is how long after the leader applied a rotated key the old
// one stays accepted: a call in flight finishes on the backend it started
// on (docs/configuration.md, "Live reload"), with the old key, as an
// operator keeps the old key active until the new one is in use.
const rotateGrace = 5 * time.Second

// retiringMetric counts the leader's replaced configurations with calls
// still in flight: the old credential stays accepted until it is 0 too. A
// call has no bound on its duration: under an injected throttle the AWS
// budget halves its rate down to a sixteenth, and a delete in flight at a
// rotation (seed 631642365) signed its DeleteLoadBalancer with the old key
// 6.2 s after the new one was applied, 8.6 s after it began.
const retiringMetric = "multicloud_ccm_config_retiring"

// retiringCap bounds the wait for retiringMetric: a replaced
// configuration whose calls have not returned a minute after the rotation
// is not waited for (its old-credential requests are then reported).
const retiringCap = time.Minute

// rotation is a credential rotation whose old credential the cloud still accepts:
// the judge deactivates it rotateGrace after the leader applied the new
// one.
type rotation struct {
	// hashes are the configuration hashes of the replicas that ran when
	// the new key was written; a replica started since read it at start.
	hashes map[*framework.CCM]int
	step   int
	at     time.Time
	// applied is when the judge saw the leader apply it (zero: not yet).
	applied time.Time
	// cloud is aws, vsphere or os.
	cloud string
	// waited: the judge logged that the leader's replaced configuration
	// still had calls in flight after rotateGrace.
	waited bool
}

// vsPassword is the vCenter password of generation gen (VSphereRotate:
// 1, 2, ...; the world starts with the simulator's own).
func vsPassword(gen int) string { return fmt.Sprintf("chaos-vc-password-%d", gen) }

// rotateKey rotates a credential at step i: the AWS backend's access key
// to generation op.N (AWSKeyRotate), or the vCenter's password
// (VSphereRotate). The cloud accepts the old credential and the new one,
// the secret files get the new one, and rotateGrace after the leader
// applied it (its configuration hash changed) the cloud refuses the old
// one. What was settled before must not have changed (rotationDisturbed);
// no request (AWS) or login (vCenter) may carry the old credential
// afterwards (oldKeyUsed, a safety check).
func (w *World) rotateKey(ctx context.Context, m *model, op Op, i int) []Violation {
	cloud, next, cur := "aws", awsKeyID(op.N), w.key
	switch op.Kind {
	case VSphereRotate:
		cloud, next, cur = "vsphere", vsPassword(op.N), w.vsPass
	case OSRotate:
		if w.os == nil {
			return nil
		}
		cloud, next, cur = "os", fmt.Sprint(op.N), fmt.Sprint(w.osGen)
	}
	if next == cur {
		return nil
	}
	if w.rot != nil && w.rot.cloud != cloud {
		w.logf("  not rotating: the %s rotation of step %d is not complete", w.rot.cloud, w.rot.step+1)
		return nil
	}
	before, err := w.snapshot(ctx)
	if err != nil {
		return []Violation{violation(vCrash, "the API server: %v", err)}
	}
	stable := w.stable(ctx, m, before)
	w.logf("  judging %d settled Services %v and %d Nodes across the %s rotation", len(stable.svcs), slices.Sorted(maps.Keys(stable.svcs)), len(stable.nodes), cloud)
	rot := &rotation{hashes: map[*framework.CCM]int{}, step: i, at: time.Now(), cloud: cloud}
	for _, r := range w.replicas {
		if exited, _ := r.Exited(); exited || r == w.paused {
			continue
		}
		if h, err := metric(ctx, r, hashMetric); err == nil {
			rot.hashes[r] = h
		}
	}
	switch cloud {
	case "aws":
		w.retired = append(w.retired, w.key)
		w.fake.SetAccessKeys(append(slices.Clone(w.retired), next)...)
		err = w.writeKey(op.N)
		w.key = next
	case "os":
		if err = w.os.rotate(ctx, op.N); err == nil {
			err = w.writeConfig(w.cfg)
		}
		w.osGen = op.N
	default:
		w.vsRetired = append(w.vsRetired, w.vsPass)
		w.vsRefused = w.sim.SetPasswords(append(slices.Clone(w.vsRetired), next)...)
		err = w.writeVSCredentials(next)
		w.vsPass = next
	}
	if err != nil {
		return []Violation{violation(vCrash, "%v", err)}
	}
	w.rot = rot
	throttling := w.fake.TotalAttempts() < w.throttleEnd
	// Wait for the leader to apply it (a reload: 500 ms period) and the
	// grace, then a little longer for what the rebuilt backend might do.
	deadline := time.Now().Add(15*time.Second + rotateGrace)
	for !w.deactivate(ctx) && time.Now().Before(deadline) {
		w.resume(false)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(1500 * time.Millisecond):
	}
	after, err := w.snapshot(ctx)
	if err != nil {
		return []Violation{violation(vCrash, "the API server: %v", err)}
	}
	// A cloud fault (throttling, an outage) fails the syncs the rebuilt
	// backend's reload starts: a failure's LoadBalancerReady False is then
	// the fault's, not the rotation's, and conditions are not compared.
	faulted := w.outage || throttling
	if w.inFailover() {
		// A leader killed, paused or resumed: a resumed one acts on what
		// it saw for up to its renew deadline beside the new leader
		// (deposed-leader-running judges that it stops); what changes
		// meanwhile is not the rotation's.
		w.logf("  not judging what the rotation of step %d changed: a failover is under way", i+1)
		return nil
	}
	return disturbed(stable, after, i, faulted, cloud)
}

// deactivate makes the fake refuse the keys rotated away rotateGrace
// after the leader applied the last rotation, and reports whether no
// rotation is pending.
// A replica paused meanwhile defers it: resumed, it would act on its old
// key before it notices its lease lost.
func (w *World) deactivate(ctx context.Context) bool {
	if w.rot == nil {
		return true
	}
	l := w.leader()
	if l == nil || w.paused != nil {
		return false
	}
	if w.rot.applied.IsZero() {
		if h0, ok := w.rot.hashes[l]; ok {
			if h, err := metric(ctx, l, hashMetric); err != nil || h == h0 {
				return false
			}
		}
		w.rot.applied = time.Now()
		w.logf("  %s applied the %s credential %s %s after the rotation", l.Name(), w.rot.cloud, w.rotated(), time.Since(w.rot.at).Round(time.Millisecond))
	}
	if time.Since(w.rot.applied) < rotateGrace {
		return false
	}
	if n, err := metric(ctx, l, retiringMetric); (err != nil || n > 0) && time.Since(w.rot.applied) < retiringCap {
		if !w.rot.waited {
			w.rot.waited = true
			w.logf("  %s still has calls in flight on a replaced configuration (%s %d, %v): the old credential stays accepted until they return", l.Name(), retiringMetric, n, err)
		}
		return false
	}
	switch w.rot.cloud {
	case "aws":
		w.fake.SetAccessKeys(w.key)
		w.rejectedSeen = w.fake.Rejected()
		w.logf("  the fake refuses %v from now on (%s after the leader applied %s)", w.retired, time.Since(w.rot.applied).Round(time.Millisecond), w.key)
	case "os":
		if err := w.os.deleteRetired(ctx); err != nil {
			w.logf("  %v", err)
		}
		w.logf("  Keystone deleted the application credentials %v (%s after the leader applied %s)", w.os.deleted, time.Since(w.rot.applied).Round(time.Millisecond), w.os.appID)
	default:
		w.vsRefused = w.sim.SetPasswords(w.vsPass)
		w.vsRefusedSeen = w.vsOldLogins()
		w.logf("  the vCenter refuses the %d retired passwords from now on (%s after the leader applied generation %d)", len(w.vsRetired), time.Since(w.rot.applied).Round(time.Millisecond), len(w.vsRetired))
	}
	w.rot = nil
	return true
}

// rotated is the credential the pending rotation brings in.
func (w *World) rotated() string {
	switch {
	case w.rot != nil && w.rot.cloud == "vsphere":
		return fmt.Sprintf("password of generation %d", len(w.vsRetired))
	case w.rot != nil && w.rot.cloud == "os":
		return "application credential " + w.os.appID
	}
	return "key " + w.key
}

// vsOldLogins is how many vCenter logins tried a retired password.
func (w *World) vsOldLogins() int {
	if w.vsRefused == nil {
		return 0
	}
	n := 0
	for pw, c := range w.vsRefused() {
		if slices.Contains(w.vsRetired, pw) {
			n += c
		}
	}
	return n
}

// oldKeyUsed reports requests the fake refused for a deactivated key since
// the judge last looked (a safety check): once the leader applied a
// rotated key, no replica may sign with the old one, a standby taking
// over included.
func (w *World) oldKeyUsed() []Violation {
	var out []Violation
	if n := w.vsOldLogins(); n > w.vsRefusedSeen {
		out = append(out, violation(vOldKey, "%d vCenter logins with a retired password since the last check (the password in use is generation %d); leader %s",
			n-w.vsRefusedSeen, len(w.vsRetired), leaderName(w.leader())))
		w.vsRefusedSeen = n
	}
	if w.os != nil {
		if n := w.os.oldUses(); n > w.os.oldSeen {
			out = append(out, violation(vOldKey, "%d logins with a deleted OpenStack application credential %v or Octavia calls refused for a revoked token since the last check (the credential in use is %s); leader %s",
				n-w.os.oldSeen, w.os.deleted, w.os.appID, leaderName(w.leader())))
			w.os.oldSeen = n
		}
	}
	if w.fake == nil {
		return out
	}
	n := w.fake.Rejected()
	if n <= w.rejectedSeen {
		return out
	}
	var actions []string
	for a := range w.fake.CallCounts() {
		if k := w.fake.LastAccessKey(a); slices.Contains(w.retired, k) {
			actions = append(actions, a+" ("+k+")")
		}
	}
	slices.Sort(actions)
	v := violation(vOldKey, "%d requests signed with a deactivated AWS key since the last check (the key in use is %s; the last %v); leader %s",
		n-w.rejectedSeen, w.key, actions, leaderName(w.leader()))
	w.rejectedSeen = n
	return append(out, v)
}

func leaderName(c *framework.CCM) string {
	if c == nil {
		return "none"
	}
	return c.Name()
}

// stableFacts are what a rotation must leave as it is: of each settled
// Service its status, record, finalizer, readiness and NLBs; of each
// initialized Node its providerID and labels.
type stableFacts struct {
	svcs  map[string]string
	nodes map[string]string
}

// stable collects the facts of what is settled in s: the judge's Services
// that are as their shape and the configuration say, with no drain in
// progress, and the Nodes the CCM initialized whose instance exists.
func (w *World) stable(ctx context.Context, m *model, s *snapshot) stableFacts {
	f := stableFacts{svcs: map[string]string{}, nodes: map[string]string{}}
	for name, shape := range m.svcs {
		svc := s.svcs[name]
		want, known := m.cfg.wanted(shape)
		if svc == nil || !known || m.abandoned[name] || requestedElsewhere(m, name, shape, want, s) || slices.ContainsFunc(m.drains, func(e drainExpect) bool { return e.svc == name }) ||
			slices.ContainsFunc(splitList(svc.Annotations[annRecord]), func(b string) bool { return !m.cfg.configured(b) }) {
			continue
		}
		if len(w.serviceSettled(ctx, m, name, shape, svc, s)) == 0 {
			f.svcs[name] = serviceFacts(svc, s, true)
		}
	}
	for name, n := range s.nodes {
		cloud, ours := m.nodes[name]
		if ours && n.Spec.ProviderID != "" && !uninitialized(n) && w.instanceExists(cloud, name) {
			f.nodes[name] = nodeFacts(n)
		}
	}
	return f
}

// serviceFacts describes what a rotation must leave of a Service; its
// conditions too with conditions.
func serviceFacts(svc *corev1.Service, s *snapshot, conditions bool) string {
	var arns, ready []string
	for _, lb := range s.nlbs[svc.Name] {
		arns = append(arns, lb.ARN)
	}
	for _, lb := range s.oslbs[svc.Name] {
		arns = append(arns, lb.ID)
	}
	slices.Sort(arns)
	for _, c := range svc.Status.Conditions {
		if c.Type == condReady || strings.HasPrefix(c.Type, condBackend) {
			ready = append(ready, c.Type+"="+string(c.Status))
		}
	}
	slices.Sort(ready)
	out := fmt.Sprintf("uid %s, status %v, record %q, finalizer %v, NLBs %v", svc.UID, ingress(svc),
		svc.Annotations[annRecord], framework.HasCleanupFinalizer(svc), arns)
	if conditions {
		out += fmt.Sprintf(", conditions %v", ready)
	}
	return out
}

func nodeFacts(n *corev1.Node) string {
	labels := slices.Sorted(maps.Keys(n.Labels))
	for i, k := range labels {
		labels[i] = k + "=" + n.Labels[k]
	}
	return fmt.Sprintf("uid %s, providerID %s, labels %v", n.UID, n.Spec.ProviderID, labels)
}

// uninitialized reports whether the Node still carries the cloud
// provider's uninitialized taint.
func uninitialized(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == "node.cloudprovider.kubernetes.io/uninitialized"
	})
}

// disturbed compares what was settled before the rotation of step i with
// the world after it; the Services' conditions only when no cloud fault
// failed calls meanwhile (faulted false).
func disturbed(f stableFacts, after *snapshot, i int, faulted bool, cloud string) []Violation {
	what := map[string]string{"aws": "AWS key", "vsphere": "vCenter password", "os": "OpenStack application credential"}[cloud]
	var out []Violation
	for _, name := range slices.Sorted(maps.Keys(f.svcs)) {
		was := f.svcs[name]
		svc := after.svcs[name]
		if svc == nil {
			out = append(out, violation(vRotation, "%s was settled (%s) and is gone after the %s rotation of step %d", name, was, what, i+1))
		} else if now := serviceFacts(svc, after, true); now != was && (!faulted || now[:strings.Index(now, ", conditions")] != was[:strings.Index(was, ", conditions")]) {
			out = append(out, violation(vRotation, "%s changed across the %s rotation of step %d: %s, now %s", name, what, i+1, was, now))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(f.nodes)) {
		was := f.nodes[name]
		n := after.nodes[name]
		if n == nil {
			out = append(out, violation(vRotation, "Node %s (%s) is gone after the %s rotation of step %d", name, was, what, i+1))
		} else if now := nodeFacts(n); now != was {
			out = append(out, violation(vRotation, "Node %s changed across the %s rotation of step %d: %s, now %s", name, what, i+1, was, now))
		}
	}
	return out
}
