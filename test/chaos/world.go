package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/sims/vcsim"
)

// leaseName is the replicas' leader-election lock (kube-system).
const leaseName = "mccm-chaos"

// leaderElection are the replicas' leader-election flags: a lease short
// enough for a failover within seconds, a renew deadline loose enough for
// a loaded 2-core machine.
var leaderElection = []string{
	"--leader-elect=true", "--leader-elect-lease-duration=8s", "--leader-elect-renew-deadline=6s",
	"--leader-elect-retry-period=1s", "--leader-elect-resource-name=" + leaseName,
}

// World is one run's cluster and clouds: a control plane, the AWS fake,
// a vCenter simulator, the cloud-config file and two CCM replicas.
type World struct {
	Dir string
	cp  *framework.ControlPlane
	c   kubernetes.Interface
	// cluster is the run's cluster ID, its own: the OpenStack stack is
	// shared with other runs and tests.
	cluster string
	// os is the world's OpenStack (nil: none, Features.OS false); osGen
	// the generation of its application credential (OSRotate).
	os    *osCloud
	osGen int
	// cfg is the configuration last written.
	cfg Config

	fake   *awsfake.Server
	awsRun *awsfake.Running
	seeded awsfake.Seeded
	sim    *vcsim.Simulator
	vs     vcsim.Backend
	// awsNodes and vsNodes map the Nodes' names (aws-0, vs-0, ...) to
	// their instances.
	awsNodes map[string]awsfake.Instance
	vsNodes  map[string]vcsim.VM

	cfgPath string
	// keyDir holds the AWS credentials' secret files; key is the access
	// key ID they hold, rot the rotation not yet complete (nil: none) and
	// retired the keys the fake refuses since (AWSKeyRotate).
	keyDir  string
	key     string
	rot     *rotation
	retired []string
	// vsCredDir holds the vCenter's credentials' secret files; vsPass is
	// the password they hold, vsRetired the passwords rotated away,
	// vsRefused the simulator's count of refused logins by password and
	// vsRefusedSeen how many of them tried a retired password when the
	// judge last looked (VSphereRotate).
	vsCredDir     string
	vsPass        string
	vsRetired     []string
	vsRefused     func() map[string]int
	vsRefusedSeen int
	// rejectedSeen is how many requests the fake had refused for their
	// key when the judge last looked.
	rejectedSeen int
	// base are the replicas' goroutines and memory at the first
	// quiescence (checkGrowth).
	base map[*framework.CCM]procStats
	opts framework.CCMOptions
	// replicas are the CCM processes meant to run; gone are those killed
	// (kept for their logs).
	replicas, gone []*framework.CCM
	killed         map[*framework.CCM]bool
	// proxies stand between each replica and kube-apiserver (WatchDelay,
	// WatchDrop).
	proxies map[*framework.CCM]*watchProxy
	// ignore are the violation classes only logged (RunOptions.Ignore).
	ignore []string
	// lastKill is when the judge last killed or paused a leader;
	// lastWatch when it last held back or cut the leader's watches.
	lastKill, lastWatch time.Time
	// outage is whether the AWS fake answers 503 (AWSOutage);
	// throttleEnd the fake's TotalAttempts once the throttled calls
	// (AWSThrottle) are spent.
	outage      bool
	throttleEnd int
	// cfgPending are the replicas' configuration hashes when the judge
	// last wrote a reload, until the leader applied it (nil: applied).
	cfgPending map[*framework.CCM]int
	// paused is the replica PauseLeader stopped, until resumeAt.
	paused   *framework.CCM
	resumeAt time.Time
	seq      int
	logf     func(string, ...any)
}

// startWorld starts everything and waits until one replica leads.
func startWorld(ctx context.Context, dir string, f Features, logf func(string, ...any)) (w *World, err error) {
	bins, err := framework.FindBinaries()
	if err == nil {
		err = bins.Check(bins.All())
	}
	if err != nil {
		return nil, &missingBinaries{err}
	}
	w = &World{Dir: dir, logf: logf, killed: map[*framework.CCM]bool{}, proxies: map[*framework.CCM]*watchProxy{},
		cluster: fmt.Sprintf("chaos%06x", rand.Uint32()>>8)} //nolint:gosec // a name, not a secret.
	defer func() {
		if err != nil {
			w.stop()
		}
	}()
	if w.cp, err = framework.StartControlPlane(ctx, framework.ControlPlaneOptions{Binaries: bins, Dir: dir}); err != nil {
		return w, err
	}
	w.c = w.cp.Client
	if _, err = w.c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: serviceNS}}, metav1.CreateOptions{}); err != nil {
		return w, fmt.Errorf("namespace: %w", err)
	}
	w.fake = awsfake.New(region)
	w.seeded = w.fake.Seed(awsfake.SeedSpec{ClusterID: w.cluster, Instances: 2})
	w.key = awsKeyID(0)
	w.fake.SetAccessKeys(w.key)
	if w.awsRun, err = w.fake.Start("127.0.0.1:0"); err != nil {
		return w, err
	}
	if w.sim, err = vcsim.Start(ctx, vcsim.Options{VMs: 2}); err != nil {
		return w, fmt.Errorf("vcsim: %w", err)
	}
	w.vs = vcsim.NewBackend("onprem", w.sim)
	w.awsNodes, w.vsNodes = map[string]awsfake.Instance{}, map[string]vcsim.VM{}
	for i, name := range cloudNodes["aws"] {
		w.awsNodes[name] = w.seeded.Instances[i]
	}
	for i, name := range cloudNodes["vsphere"] {
		w.vsNodes[name] = w.sim.VMs[i]
	}
	if f.OS {
		if w.os, err = startOpenStack(ctx, w.cluster, dir); err != nil {
			return w, fmt.Errorf("OpenStack: %w", err)
		}
	}
	w.cfgPath = filepath.Join(dir, "cloud-config.yaml")
	w.keyDir = filepath.Join(dir, "aws-credentials")
	if err = w.writeKey(0); err != nil {
		return w, err
	}
	w.vsCredDir, w.vsPass = filepath.Join(dir, "vsphere-credentials"), w.sim.Password
	w.vsRefused = w.sim.SetPasswords(w.vsPass)
	if err = w.writeVSCredentials(w.vsPass); err != nil {
		return w, err
	}
	if err = w.writeConfig(f.initialConfig()); err != nil {
		return w, err
	}
	w.opts = framework.CCMOptions{
		Env: w.vs.Env(),
		ExtraArgs: append([]string{"--cloud-config=" + w.cfgPath, "--cloud-config-reload-period=500ms"},
			leaderElection...),
		ReadyTimeout: 90 * time.Second,
	}
	for name, cloud := range baseNodes {
		if err = w.join(ctx, Op{Kind: NodeJoin, Name: name, Cloud: cloud, Flag: true}); err != nil {
			return w, fmt.Errorf("node %s: %w", name, err)
		}
	}
	for range 2 {
		if err = w.startReplica(ctx); err != nil {
			return w, err
		}
	}
	if err = framework.WaitFor(ctx, 60*time.Second, "a replica leads", func(context.Context) (bool, string, error) {
		l := w.leader()
		return l != nil, "no replica logged that it acquired the lease", nil
	}); err != nil {
		return w, err
	}
	return w, w.baseline(ctx)
}

// failoverWindow is how long after a leader's death the judge counts a
// Service's deletion as unseen by any replica: the lease (8 s), the new
// leader's start and its informers' first list.
const failoverWindow = 30 * time.Second

// inFailover reports whether a leader was killed less than failoverWindow
// ago.
func (w *World) inFailover() bool { return time.Since(w.lastKill) < failoverWindow }

// missingBinaries says the binaries are not built.
type missingBinaries struct{ err error }

func (e *missingBinaries) Error() string { return framework.MissingBinariesMessage(e.err) }

// cloudNodes are the names of the Nodes of AWS's and vSphere's
// instances, by cloud: the world starts two of each.
var cloudNodes = map[string][]string{"aws": {"aws-0", "aws-1"}, "vsphere": {"vs-0", "vs-1"}}

// startReplica starts a replica that reaches kube-apiserver through a
// watch proxy of its own.
func (w *World) startReplica(ctx context.Context) error {
	w.seq++
	opts := w.opts
	opts.Name = fmt.Sprintf("ccm-%d", w.seq)
	p, err := startWatchProxy(w.cp)
	if err != nil {
		return err
	}
	if opts.Kubeconfig, err = p.kubeconfig(w.cp, filepath.Join(w.Dir, opts.Name+".kubeconfig")); err != nil {
		p.close()
		return err
	}
	c, err := w.cp.StartCCM(ctx, opts)
	if c != nil && c.Process != nil {
		w.replicas = append(w.replicas, c)
		w.proxies[c] = p
	} else {
		p.close()
	}
	if err != nil {
		return fmt.Errorf("start %s: %w", opts.Name, err)
	}
	return nil
}

// watchFault holds back the leader's watch events for d (d > 0), or cuts
// its watches mid-way (d == 0).
func (w *World) watchFault(d time.Duration) {
	l := w.leader()
	if l == nil {
		return
	}
	p := w.proxies[l]
	w.lastWatch = time.Now().Add(d)
	if d > 0 {
		w.logf("holding back the watch events of the leader %s for %s", l.Name(), d)
		p.hold(d)
		return
	}
	w.logf("cut %d watches of the leader %s mid-way", p.drop(), l.Name())
}

// leader is the live replica holding the lease (kube-system/mccm-chaos),
// or nil: the one whose log says the lease's holder identity became
// leader. A paused one is passed over (its standby leads, or soon will),
// and so is one that led before and lost the lease while paused: resumed,
// it still acts until it notices (deposed).
func (w *World) leader() *framework.CCM {
	if w.c == nil {
		return nil // no cluster (a unit test of a check)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	holder, err := framework.LeaseHolder(ctx, w.c, "kube-system", leaseName)
	if err != nil || holder == "" {
		return nil
	}
	for _, r := range w.replicas {
		if exited, _ := r.Exited(); exited || r == w.paused {
			continue
		}
		if strings.Contains(readLog(r), holder+" became leader") {
			return r
		}
	}
	return nil
}

// deposed are the live replicas, not paused, that acquired the lease once
// and do not hold it now: a replica that loses its lease must stop (the
// CCM exits), or two replicas act at once.
func (w *World) deposed() []*framework.CCM {
	l := w.leader()
	var out []*framework.CCM
	for _, r := range w.replicas {
		if exited, _ := r.Exited(); exited || r == w.paused || r == l {
			continue
		}
		if strings.Contains(readLog(r), "Successfully acquired lease") {
			out = append(out, r)
		}
	}
	return out
}

func readLog(r *framework.CCM) string {
	data, _ := os.ReadFile(r.LogPath())
	return string(data)
}

// killLeader kills the leader with SIGKILL and starts another replica.
func (w *World) killLeader(ctx context.Context) error {
	l := w.leader()
	if l == nil {
		return nil
	}
	w.logf("killing the leader %s (pid %d)", l.Name(), l.PID())
	w.killed[l] = true
	w.lastKill = time.Now()
	if err := syscall.Kill(l.PID(), syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %s: %w", l.Name(), err)
	}
	<-l.Done()
	w.retire(l)
	return w.startReplica(ctx)
}

// pauseFor is how long PauseLeader stops the leader: past its lease (8 s)
// and the standby's retry, so that the standby leads before it resumes.
const pauseFor = 12 * time.Second

// pauseLeader stops the leader with SIGSTOP; resume continues it once
// pauseFor has passed (checked before each step and at quiescence). One
// replica is paused at a time.
func (w *World) pauseLeader() error {
	l := w.leader()
	if l == nil || w.paused != nil {
		return nil
	}
	w.logf("pausing the leader %s (pid %d) for %s", l.Name(), l.PID(), pauseFor)
	if err := syscall.Kill(l.PID(), syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pause %s: %w", l.Name(), err)
	}
	w.paused, w.resumeAt, w.lastKill = l, time.Now().Add(pauseFor), time.Now()
	return nil
}

// resume continues the paused replica when its pause is over, or at once
// with now; it then finds its lease taken and exits (replicasAlive starts
// another), or, when the standby could not take the lease meanwhile, leads
// on.
func (w *World) resume(now bool) {
	if w.paused == nil || (!now && time.Now().Before(w.resumeAt)) {
		return
	}
	w.logf("resuming %s after %s", w.paused.Name(), time.Since(w.resumeAt.Add(-pauseFor)).Round(time.Millisecond))
	if err := syscall.Kill(w.paused.PID(), syscall.SIGCONT); err != nil {
		w.logf("resume %s: %v", w.paused.Name(), err)
	}
	w.paused = nil
	w.lastKill = time.Now() // it acts on what it saw before its pause
}

func (w *World) retire(r *framework.CCM) {
	for i, x := range w.replicas {
		if x == r {
			w.replicas = append(w.replicas[:i], w.replicas[i+1:]...)
			break
		}
	}
	w.gone = append(w.gone, r)
}

// replicasAlive replaces a replica that exited because it lost the lease
// (the CCM exits then: expected under load) and reports one that exited
// for any other reason.
func (w *World) replicasAlive(ctx context.Context) error {
	for _, r := range append([]*framework.CCM(nil), w.replicas...) {
		exited, werr := r.Exited()
		if !exited {
			continue
		}
		w.retire(r)
		data, _ := os.ReadFile(r.LogPath())
		if strings.Contains(string(data), "leaderelection lost") {
			w.logf("%s lost the lease and exited; starting another replica", r.Name())
			if err := w.startReplica(ctx); err != nil {
				return err
			}
			continue
		}
		return fmt.Errorf("replica %s exited (%w):\n%s", r.Name(), werr, r.LogTail(40))
	}
	return nil
}

func (w *World) writeConfig(c Config) error {
	w.cfg = c
	tmp := w.cfgPath + ".tmp"
	text := c.render(w.cluster, w.awsRun.URL, w.seeded.VPCID, w.keyDir, w.vs)
	// The vCenter's credentials come from secret files too (a rotation
	// rewrites them), not from the environment vcsim.Backend sets.
	for _, kv := range w.vs.Env() {
		name, _, _ := strings.Cut(kv, "=")
		text = strings.ReplaceAll(text, "{env: "+name+"}", "{file: "+filepath.Join(w.vsCredDir, name)+"}")
	}
	if c.OS && w.os != nil {
		text += w.os.yaml()
	}
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		return fmt.Errorf("cloud-config: %w", err)
	}
	return os.Rename(tmp, w.cfgPath)
}

// writeKey writes the AWS credentials of generation gen into the secret
// files the cloud-config references, as a rotated Secret is: the secret
// first, the access key ID last, each replaced whole.
func (w *World) writeKey(gen int) error {
	if err := os.MkdirAll(w.keyDir, 0o700); err != nil {
		return err
	}
	for _, f := range [][2]string{{"secret-access-key", fmt.Sprintf("chaos-secret-%d", gen)}, {"access-key-id", awsKeyID(gen)}} {
		path := filepath.Join(w.keyDir, f[0])
		if err := os.WriteFile(path+".tmp", []byte(f[1]+"\n"), 0o600); err != nil {
			return fmt.Errorf("AWS credentials: %w", err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			return fmt.Errorf("AWS credentials: %w", err)
		}
	}
	return nil
}

// writeVSCredentials writes the vCenter's user and password into the
// secret files the cloud-config references, the password last.
func (w *World) writeVSCredentials(password string) error {
	if err := os.MkdirAll(w.vsCredDir, 0o700); err != nil {
		return err
	}
	for _, kv := range w.vs.Env() {
		name, v, _ := strings.Cut(kv, "=")
		if strings.HasSuffix(name, "_PASSWORD") {
			v = password
		}
		path := filepath.Join(w.vsCredDir, name)
		if err := os.WriteFile(path+".tmp", []byte(v+"\n"), 0o600); err != nil {
			return fmt.Errorf("vCenter credentials: %w", err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			return fmt.Errorf("vCenter credentials: %w", err)
		}
	}
	return nil
}

// logs are every CCM log path, killed replicas' included.
func (w *World) logs() []string {
	var out []string
	for _, r := range append(append([]*framework.CCM(nil), w.gone...), w.replicas...) {
		out = append(out, r.LogPath())
	}
	return out
}

// stop ends every process and simulator the world started.
func (w *World) stop() {
	w.resume(true)
	for _, r := range w.replicas {
		_ = r.Stop(10 * time.Second)
	}
	for _, p := range w.proxies {
		p.close()
	}
	if w.sim != nil {
		w.sim.Close()
	}
	if w.awsRun != nil {
		_ = w.awsRun.Close()
	}
	if w.os != nil {
		w.os.close()
	}
	if w.cp != nil {
		if err := w.cp.Stop(true); err != nil && !errors.Is(err, os.ErrNotExist) {
			w.logf("stop control plane: %v", err)
		}
	}
}

// replicaHashes are the configuration hashes (hashMetric) of the replicas
// running and not paused.
func (w *World) replicaHashes(ctx context.Context) map[*framework.CCM]int {
	out := map[*framework.CCM]int{}
	for _, r := range w.replicas {
		if exited, _ := r.Exited(); exited || r == w.paused {
			continue
		}
		if h, err := metric(ctx, r, hashMetric); err == nil {
			out[r] = h
		}
	}
	return out
}

// configWait bounds awaitConfig: a reload is read within 500 ms
// (--cloud-config-reload-period) and applied at once.
const configWait = 15 * time.Second

// awaitConfig waits, up to configWait, until the leader applied the
// configuration the judge last wrote (its hash changed since the write,
// or it started after it), and reports whether it did.
func (w *World) awaitConfig(ctx context.Context) bool {
	if w.cfgPending == nil {
		return true
	}
	start := time.Now()
	for {
		if l := w.leader(); l != nil {
			h0, ok := w.cfgPending[l]
			h, err := metric(ctx, l, hashMetric)
			if !ok || (err == nil && h != h0) {
				w.cfgPending = nil
				w.logf("  %s applied the configuration written last (%s waited)", l.Name(), time.Since(start).Round(time.Millisecond))
				return true
			}
		}
		if time.Since(start) > configWait {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(200 * time.Millisecond):
		}
	}
}
