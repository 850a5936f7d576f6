package openstack

// Tests of a shared load balancer's tag changes taking turns (written as
// probes by the review of 1cde935, each failing on it). They need no real
// OpenStack: a minimal fake Octavia (load balancers, empty listener
// lists) sits on the fake Keystone/Neutron's mux.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/cloud-provider/api"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

type probeLB struct {
	ID, Name, Status, VipPortID string
	Tags                        []string
}

// probeOctavia: PUT of a load balancer not ACTIVE/ERROR answers 409 (as
// Octavia does); an accepted PUT leaves it PENDING_UPDATE until settle.
type probeOctavia struct {
	t  testing.TB
	mu sync.Mutex
	lb map[string]*probeLB
	// onGet, when set, runs (without mu) before a GET of one load balancer
	// is answered; n counts those GETs from 1.
	onGet func(id string, n int)
	// afterGet, when set, runs once the GET's answer is read from the
	// load balancer and before it is sent.
	afterGet func(id string, n int)
	gets     int
	puts     [][]string
	// fast makes an accepted PUT leave the load balancer ACTIVE.
	fast bool
}

func (o *probeOctavia) json(id string) map[string]any {
	lb := o.lb[id]
	return map[string]any{"id": lb.ID, "name": lb.Name, "tags": slices.Clone(lb.Tags), "provisioning_status": lb.Status,
		"operating_status": "ONLINE", "vip_port_id": lb.VipPortID, "vip_address": "10.0.0.5", "project_id": "p-1",
		"created_at": "2024-01-01T00:00:00", "updated_at": "2024-01-01T00:00:00", "listeners": []any{}, "pools": []any{}}
}

func (o *probeOctavia) settle(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if lb := o.lb[id]; lb != nil {
		lb.Status = lbActive
	}
}

func (o *probeOctavia) tags(id string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.lb[id] == nil {
		return nil
	}
	out := slices.Clone(o.lb[id].Tags)
	slices.Sort(out)
	return out
}

func (o *probeOctavia) exists(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lb[id] != nil
}

func newProbeOctavia(t testing.TB, f *FakeOpenStack, lbs ...*probeLB) *probeOctavia {
	o := &probeOctavia{t: t, lb: map[string]*probeLB{}}
	for _, lb := range lbs {
		o.lb[lb.ID] = lb
	}
	m := f.Server.Mux
	m.HandleFunc("GET /octavia/v2.0/lbaas/listeners", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"listeners": []any{}})
	})
	m.HandleFunc("GET /octavia/v2.0/lbaas/pools", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"pools": []any{}})
	})
	m.HandleFunc("GET /octavia/v2.0/lbaas/loadbalancers", func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		defer o.mu.Unlock()
		q := r.URL.Query()
		out := []any{}
		for id, lb := range o.lb {
			if q.Has("name") && q.Get("name") != lb.Name {
				continue
			}
			ok := true
			for _, v := range q["tags"] {
				for _, t := range strings.Split(v, ",") {
					ok = ok && slices.Contains(lb.Tags, t)
				}
			}
			if ok {
				out = append(out, o.json(id))
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"loadbalancers": out})
	})
	m.HandleFunc("/octavia/v2.0/lbaas/loadbalancers/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if r.Method == http.MethodGet {
			o.mu.Lock()
			o.gets++
			n, hook, after := o.gets, o.onGet, o.afterGet
			o.mu.Unlock()
			if hook != nil {
				hook(id, n)
			}
			if after != nil {
				o.mu.Lock()
				var body map[string]any
				if o.lb[id] != nil {
					body = o.json(id)
				}
				o.mu.Unlock()
				after(id, n)
				if body != nil {
					writeJSON(w, http.StatusOK, map[string]any{"loadbalancer": body})
					return
				}
			}
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		lb := o.lb[id]
		if lb == nil {
			writeJSON(w, http.StatusNotFound, map[string]any{"faultcode": "Client", "faultstring": "Load Balancer " + id + " not found."})
			return
		}
		switch r.Method {
		case http.MethodGet:
			writeJSON(w, http.StatusOK, map[string]any{"loadbalancer": o.json(id)})
		case http.MethodPut:
			if lb.Status != lbActive && lb.Status != lbError {
				writeJSON(w, http.StatusConflict, map[string]any{"faultcode": "Client", "faultstring": "Load Balancer " + id + " is immutable and cannot be updated."})
				return
			}
			var req struct {
				LB struct {
					Tags []string `json:"tags"`
				} `json:"loadbalancer"`
			}
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				o.t.Errorf("PUT: %v", err)
			}
			lb.Tags = req.LB.Tags
			o.puts = append(o.puts, slices.Clone(req.LB.Tags))
			if !o.fast {
				lb.Status = "PENDING_UPDATE"
			}
			writeJSON(w, http.StatusOK, map[string]any{"loadbalancer": o.json(id)})
		case http.MethodDelete:
			if lb.Status != lbActive && lb.Status != lbError {
				writeJSON(w, http.StatusConflict, map[string]any{"faultcode": "Client", "faultstring": "immutable"})
				return
			}
			delete(o.lb, id)
			w.WriteHeader(http.StatusNoContent)
		default:
			o.t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
		}
	})
	return o
}

const probeCluster = "c63b"

// probeBackend is one LoadBalancer over the fakes (each call makes a new
// one: a second backend, or a reloaded generation).
func probeBackend(t testing.TB, f *FakeOpenStack, maxShared int) *LoadBalancer {
	t.Helper()
	s := f.Settings(t)
	s.LoadBalancer.Enabled = ptr(true)
	s.Endpoints.LoadBalancer = f.URL() + "/octavia/"
	s.Endpoints.Network = f.NetworkURL()
	if maxShared > 0 {
		s.LoadBalancer.MaxSharedLB = maxShared
	}
	conn, err := newConnector("shared-turns", s)
	if err != nil {
		t.Fatal(err)
	}
	l := newLoadBalancer("shared-turns", probeCluster, &s.LoadBalancer, conn.get)
	l.retryDelay = time.Millisecond
	return l
}

func probeIsRetry(err error) bool {
	re := (*api.RetryError)(nil)
	return errors.As(err, &re)
}

const probeLBID = "0b0b0b0b-0000-4000-8000-000000000001"

// rebaseTags: duplicates, a tag added by one and removed by another,
// order.
func TestRebaseTagsCases(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		read, want, cur, out []string
	}{
		{"duplicate in cur, removed", []string{"x", "a"}, []string{"x"}, []string{"x", "a", "a"}, []string{"x"}},
		{"duplicate in cur, kept", []string{"x", "a"}, []string{"x", "a"}, []string{"x", "a", "a"}, []string{"x", "a", "a"}},
		{"duplicate in read, one copy dropped from want", []string{"x", "a", "a"}, []string{"x", "a"}, []string{"x", "a", "a"}, []string{"x", "a", "a"}},
		{"added by me, already added by another", []string{"x"}, []string{"x", "c"}, []string{"x", "c"}, []string{"x", "c"}},
		{"added twice in want", []string{"x"}, []string{"x", "c", "c"}, []string{"x"}, []string{"x", "c"}},
		{"kept by me, removed by another: stays removed", []string{"x", "a", "b"}, []string{"x", "b"}, []string{"x", "b"}, []string{"x", "b"}},
		{"removed by me, re-added by another since: removed", []string{"x", "a"}, []string{"x"}, []string{"x", "a"}, []string{"x"}},
		{"added by me, removed by another (read before my add)", []string{"x"}, []string{"x", "c"}, []string{"x"}, []string{"x", "c"}},
		{"nil read (join of an untagged LB)", nil, []string{"c"}, []string{"x", "y"}, []string{"x", "y", "c"}},
		{"nil cur", []string{"a"}, []string{"a", "c"}, nil, []string{"c"}},
		{"order: cur's order, then additions", []string{"b", "a"}, []string{"a", "b", "d", "c"}, []string{"z", "a", "b"}, []string{"z", "a", "b", "d", "c"}},
		{"cluster tag removed by another (never by a sharer)", []string{"mccm-cluster=c", "s"}, []string{"mccm-cluster=c"}, []string{"s"}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := rebaseTags(tc.read, tc.want, tc.cur)
			if got == nil || !slices.Equal(got, tc.out) {
				t.Errorf("rebaseTags(%q, %q, %q) = %#v, want %q", tc.read, tc.want, tc.cur, got, tc.out)
			}
		})
	}
}

// leaveThen: retagShared refuses (the load balancer is PENDING when its
// turn comes): nothing written, and the delete must not report success.
func TestLeaveThenRefusedRetagIsNoSuccess(t *testing.T) {
	f := NewFakeOpenStack(t)
	f.AnyToken = true
	b := newService("b")
	l := probeBackend(t, f, 0)
	lb := &probeLB{ID: probeLBID, Name: "mccm_" + probeCluster + "_default_a", Status: lbActive, VipPortID: "port-1",
		Tags: []string{"mccm-cluster=" + probeCluster, "mccm-service=default/a", l.sharedTag(b)}}
	o := newProbeOctavia(t, f, lb)
	ctx := context.Background()
	sc, err := l.clients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stale, err := l.byID(ctx, sc, probeLBID)
	if err != nil {
		t.Fatal(err)
	}
	o.onGet = func(_ string, _ int) {
		o.mu.Lock()
		o.lb[probeLBID].Status = "PENDING_UPDATE"
		o.mu.Unlock()
	}
	err = l.leave(ctx, sc, b, stale, l.sharerListeners("kubernetes", b), l.sharedTag(b), &lbOptions{})
	if err == nil || !probeIsRetry(err) {
		t.Errorf("leave = %v, want a retry (tag not written)", err)
	}
	if got := o.tags(probeLBID); !slices.Contains(got, l.sharedTag(b)) || len(o.puts) != 0 {
		t.Errorf("tags %q, puts %q", got, o.puts)
	}
}

// adoptLB writes "the tags I read plus mine" in the load balancer's turn,
// on its tags as they are: a sharer's leave that lands between the
// adopting Service's read and its write stays done (its tag does not come
// back, and the load balancer can be abandoned).
func TestAdoptLBKeepsAConcurrentLeave(t *testing.T) {
	f := NewFakeOpenStack(t)
	f.AnyToken = true
	a, b := newService("a"), newService("b")
	l := probeBackend(t, f, 0)
	lb := &probeLB{ID: probeLBID, Name: occmName("kubernetes", a), Status: lbActive, VipPortID: "port-1",
		Tags: []string{occmName("kubernetes", a), l.sharedTag(b)}}
	o := newProbeOctavia(t, f, lb)
	ctx := context.Background()
	sc, err := l.clients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stale, err := l.byID(ctx, sc, probeLBID) // a's lookup
	if err != nil {
		t.Fatal(err)
	}
	// b leaves (its own read), and Octavia is done with it.
	bRead, _ := l.byID(ctx, sc, probeLBID)
	if _, err := l.retagShared(ctx, sc, b, bRead, slices.DeleteFunc(slices.Clone(bRead.Tags), func(t string) bool { return t == l.sharedTag(b) }), "left by", nil); !probeIsRetry(err) {
		t.Fatal(err)
	}
	o.settle(probeLBID)
	// a adopts from its read.
	if err := l.adoptLB(ctx, sc, a, stale); !probeIsRetry(err) {
		t.Fatal(err)
	}
	if got := o.tags(probeLBID); slices.Contains(got, l.sharedTag(b)) {
		t.Errorf("tags %q: b's tag, removed by its leave, came back with a's adoption", got)
	}
}

// Two LoadBalancer values (two backends on one Octavia project, or a
// reloaded backend's new generation next to a call in flight on the old
// one) share the turns (they are the process's): b's leave, started
// between c's re-read and c's write, waits for c's turn and does not put
// c's tag back.
func TestTwoBackendsRetagSameLB(t *testing.T) {
	f := NewFakeOpenStack(t)
	f.AnyToken = true
	b, c := newService("b"), newService("c")
	l1, l2 := probeBackend(t, f, 0), probeBackend(t, f, 0)
	lb := &probeLB{ID: probeLBID, Name: "mccm_" + probeCluster + "_default_a", Status: lbActive, VipPortID: "port-1",
		Tags: []string{"mccm-cluster=" + probeCluster, l1.sharedTag(b), l1.sharedTag(c)}}
	o := newProbeOctavia(t, f, lb)
	ctx := context.Background()
	sc1, _ := l1.clients(ctx)
	sc2, err := l2.clients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	read, _ := l1.byID(ctx, sc1, probeLBID)
	without := func(tag string) []string {
		return slices.DeleteFunc(slices.Clone(read.Tags), func(t string) bool { return t == tag })
	}
	gets := o.gets
	bDone := make(chan struct{})
	o.afterGet = func(_ string, n int) {
		if n == gets+1 { // c's re-read in retagShared: b leaves now, and waits for c's turn
			go func() {
				defer close(bDone)
				for range 20 {
					_, err := l1.retagShared(ctx, sc1, b, read, without(l1.sharedTag(b)), "left by", nil)
					if err != nil && strings.Contains(err.Error(), " is PENDING") {
						o.settle(probeLBID)
						continue
					}
					if !probeIsRetry(err) {
						t.Error(err)
					}
					break
				}
				o.settle(probeLBID)
			}()
			time.Sleep(100 * time.Millisecond)
		}
	}
	if _, err := l2.retagShared(ctx, sc2, c, read, without(l2.sharedTag(c)), "left by", nil); !probeIsRetry(err) {
		t.Fatal(err)
	}
	<-bDone
	if got, want := o.tags(probeLBID), []string{"mccm-cluster=" + probeCluster}; !slices.Equal(got, want) {
		t.Errorf("tags %q, want %q: a Service's tag came back (puts %q)", got, want, o.puts)
	}
}

// The same interleaving with one LoadBalancer value: b waits for c's
// turn, then rebases on c's write.
func TestOneBackendRetagTakesTurns(t *testing.T) {
	f := NewFakeOpenStack(t)
	f.AnyToken = true
	b, c := newService("b"), newService("c")
	l := probeBackend(t, f, 0)
	lb := &probeLB{ID: probeLBID, Name: "mccm_" + probeCluster + "_default_a", Status: lbActive, VipPortID: "port-1",
		Tags: []string{"mccm-cluster=" + probeCluster, l.sharedTag(b), l.sharedTag(c)}}
	o := newProbeOctavia(t, f, lb)
	o.fast = true // Octavia done at once: only the lock keeps the turns
	ctx := context.Background()
	sc, _ := l.clients(ctx)
	read, _ := l.byID(ctx, sc, probeLBID)
	without := func(tag string) []string {
		return slices.DeleteFunc(slices.Clone(read.Tags), func(t string) bool { return t == tag })
	}
	gets := o.gets
	var bErr error
	bDone := make(chan struct{})
	o.onGet = func(_ string, n int) {
		if n == gets+1 {
			go func() {
				defer close(bDone)
				_, bErr = l.retagShared(ctx, sc, b, read, without(l.sharedTag(b)), "left by", nil)
			}()
			select {
			case <-bDone:
				t.Error("b's retag ran while c held the turn")
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	if _, err := l.retagShared(ctx, sc, c, read, without(l.sharedTag(c)), "left by", nil); !probeIsRetry(err) {
		t.Fatal(err)
	}
	<-bDone
	if !probeIsRetry(bErr) {
		t.Fatal(bErr)
	}
	if got, want := o.tags(probeLBID), []string{"mccm-cluster=" + probeCluster}; !slices.Equal(got, want) {
		t.Errorf("tags %q, want %q (puts %q)", got, want, o.puts)
	}
}

// loadBalancer.maxSharedLB is checked again in the load balancer's turn:
// of two Services joining at once from the same read, the second is
// refused (without it both would stay, once the second no longer drops
// the first's tag: more sharers than maxSharedLB).
func TestConcurrentJoinsKeepMaxShared(t *testing.T) {
	f := NewFakeOpenStack(t)
	f.AnyToken = true
	b, c := newService("b"), newService("c")
	l := probeBackend(t, f, 2)
	lb := &probeLB{ID: probeLBID, Name: "mccm_" + probeCluster + "_default_a", Status: lbActive, VipPortID: "port-1",
		Tags: []string{"mccm-cluster=" + probeCluster, "mccm-service=default/a"}}
	o := newProbeOctavia(t, f, lb)
	ctx := context.Background()
	sc, _ := l.clients(ctx)
	read, _ := l.byID(ctx, sc, probeLBID)
	for _, svc := range []*corev1.Service{b, c} {
		stale := *read
		stale.Tags = slices.Clone(read.Tags)
		_, err := l.ensureShared(ctx, sc, "kubernetes", svc, &stale, nil, &lbOptions{})
		switch {
		case svc == c && (err == nil || !strings.Contains(err.Error(), "maxSharedLB is 2")):
			t.Errorf("c, joining second from the same read: %v, want refused (maxSharedLB)", err)
		case svc == b && !probeIsRetry(err):
			t.Fatalf("%s: %v", svc.Name, err)
		}
		o.settle(probeLBID)
	}
	now, _ := l.byID(ctx, sc, probeLBID)
	if n := l.sharers(now, newService("nobody"), "kubernetes"); n > l.settings.MaxSharedLB {
		t.Errorf("tags %q: %d Services on the load balancer, maxSharedLB %d", now.Tags, n, l.settings.MaxSharedLB)
	}
}

// The owner leaving when its last sharer left between the owner's read
// and its turn: its change would abandon the load balancer, so it deletes
// it in that turn, while its tag still finds it, with the floating IP
// leaveAsOwner handed over to it; and when the sharer's leave was still
// PENDING at the owner's turn, the owner's delete (deleteOne) releases
// that floating IP too. Without this the floating IP stayed allocated,
// and without the load-balancer-id annotation the load balancer too.
func TestOwnerLeavingLastDeletes(t *testing.T) {
	for _, tc := range []struct {
		name               string
		annotated, pending bool
	}{{"annotated", true, false}, {"no annotation", false, false}, {"b's leave still PENDING at a's turn", true, true}} {
		annotated := tc.annotated
		t.Run(tc.name, func(t *testing.T) {
			f := NewFakeOpenStack(t)
			f.AnyToken = true
			a, b := newService("a"), newService("b")
			if annotated {
				a.Annotations[string(AnnotationLoadBalancerID)] = probeLBID
			}
			l := probeBackend(t, f, 0)
			l.settings.FloatingNetworkID = "fnet"
			lb := &probeLB{ID: probeLBID, Name: l.lbName(a), Status: lbActive, VipPortID: "port-1",
				Tags: []string{"mccm-cluster=" + probeCluster, "mccm-service=default/a", l.sharedTag(b)}}
			o := newProbeOctavia(t, f, lb)
			f.AddFloatingIP("172.24.4.50", "fnet")
			f.mu.Lock()
			for _, p := range f.fips {
				p.PortID, p.Description = "port-1", l.lbName(a)
			}
			f.mu.Unlock()
			gets := o.gets
			o.onGet = func(_ string, n int) {
				if n == gets+1 { // a's turn in retagShared: b has left meanwhile
					o.mu.Lock()
					o.lb[probeLBID].Tags = []string{"mccm-cluster=" + probeCluster, "mccm-service=default/a"}
					if tc.pending {
						o.lb[probeLBID].Status = "PENDING_UPDATE"
					}
					o.mu.Unlock()
				}
			}
			ctx := context.Background()
			var err error
			for range 10 {
				if err = l.EnsureLoadBalancerDeleted(ctx, "kubernetes", a); err == nil {
					break
				}
				if !probeIsRetry(err) {
					t.Fatal(err)
				}
				o.settle(probeLBID)
			}
			if err != nil {
				t.Fatalf("delete never done: %v", err)
			}
			if o.exists(probeLBID) {
				t.Errorf("a's delete done, the load balancer (tags %q) is left behind", o.tags(probeLBID))
			}
			if fips := f.FloatingIPs(); len(fips) > 0 {
				t.Errorf("a's delete done, floating IPs left allocated: %+v", fips)
			}
		})
	}
}

// Dry run: retagShared records the intent and returns the un-rebased
// tags; leaveThen then plans deleteAbandoned from them.
func TestDryRunLeave(t *testing.T) {
	f := NewFakeOpenStack(t)
	f.AnyToken = true
	b := newService("b")
	l := probeBackend(t, f, 0)
	lb := &probeLB{ID: probeLBID, Name: "mccm_" + probeCluster + "_default_a", Status: lbActive, VipPortID: "port-1",
		Tags: []string{"mccm-cluster=" + probeCluster, l.sharedTag(b)}}
	o := newProbeOctavia(t, f, lb)
	ctx, intents := backends.WithDryRun(context.Background())
	sc, _ := l.clients(ctx)
	read, _ := l.byID(ctx, sc, probeLBID)
	if err := l.leave(ctx, sc, b, read, l.sharerListeners("kubernetes", b), l.sharedTag(b), &lbOptions{}); err != nil {
		t.Fatal(err)
	}
	var calls []string
	for _, in := range intents() {
		calls = append(calls, in.Call)
	}
	if want := []string{"openstack: PUT load balancer tags", "openstack: DELETE load balancer (cascade)"}; !slices.Equal(calls, want) {
		t.Errorf("dry-run calls %q, want %q", calls, want)
	}
	if len(o.puts) != 0 || !o.exists(probeLBID) {
		t.Errorf("dry run wrote: puts %q", o.puts)
	}
}

// A load balancer abandoned as the leaving Service read it is deleted in
// its turn, as it is then: a Service that joined (its tag written,
// Octavia done) after that read keeps it.
func TestDeleteAbandonedKeepsAJoin(t *testing.T) {
	f := NewFakeOpenStack(t)
	f.AnyToken = true
	b, c := newService("b"), newService("c")
	l := probeBackend(t, f, 0)
	lb := &probeLB{ID: probeLBID, Name: "mccm_" + probeCluster + "_default_a", Status: lbActive, VipPortID: "port-1",
		Tags: []string{"mccm-cluster=" + probeCluster}}
	o := newProbeOctavia(t, f, lb)
	ctx := context.Background()
	sc, _ := l.clients(ctx)
	read, _ := l.byID(ctx, sc, probeLBID) // b's next call after its untag: abandoned
	joined, _ := l.byID(ctx, sc, probeLBID)
	if _, err := l.retagShared(ctx, sc, c, joined, append(slices.Clone(joined.Tags), l.sharedTag(c)), "joined by", nil); !probeIsRetry(err) {
		t.Fatal(err)
	}
	o.settle(probeLBID)
	_ = l.leave(ctx, sc, b, read, l.sharerListeners("kubernetes", b), l.sharedTag(b), &lbOptions{})
	if !o.exists(probeLBID) {
		t.Errorf("the load balancer c joined was deleted by b's stale abandoned read")
	}
}
