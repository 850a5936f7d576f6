package openstack

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	corev1 "k8s.io/api/core/v1"

	"k8s.io/cloud-provider/api"
)

// TestRebaseTags: a change of a load balancer's tags, read before
// another change landed, is applied to the tags as they are now.
func TestRebaseTags(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		read, want, cur, out []string
	}{
		{"a leaves after b left", []string{"x", "a", "b"}, []string{"x", "a"}, []string{"x", "a"}, []string{"x", "a"}},
		{"b leaves after a left", []string{"x", "a", "b"}, []string{"x", "a"}, []string{"x", "b"}, []string{"x"}},
		{"c joins after a left", []string{"x", "a"}, []string{"x", "a", "c"}, []string{"x"}, []string{"x", "c"}},
		{"a leaves after c joined", []string{"x", "a"}, []string{"x"}, []string{"x", "a", "c"}, []string{"x", "c"}},
		{"nothing left", []string{"a"}, nil, []string{"a"}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rebaseTags(tc.read, tc.want, tc.cur); !slices.Equal(got, tc.out) || got == nil {
				t.Errorf("rebaseTags(%v, %v, %v) = %#v, want %v", tc.read, tc.want, tc.cur, got, tc.out)
			}
		})
	}
}

// TestRetagSharedFromAStaleRead (CI, TestServiceControllerSharedOwnerKeepsFloatingIP:
// the shared load balancer left behind by its last two Services): on the
// real Octavia, two Services leave a shared load balancer, each from the
// copy read before either left. Written from that copy, the second
// change put back the first one's tag, and the load balancer, tagged for
// a Service that was gone, was never abandoned. Both leave at once too:
// the changes take turns.
func TestRetagSharedFromAStaleRead(t *testing.T) {
	t.Parallel()
	s := realOctavia(t)
	c := newRealCloud(t, s, "t"+randomID(t))
	ctx := context.Background()
	sc, err := c.lb.clients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	create := func(tags []string) *loadbalancers.LoadBalancer {
		lb, err := loadbalancers.Create(ctx, sc.loadBalancer, loadbalancers.CreateOpts{Name: "mccm-retag-" + randomID(t), VipSubnetID: VIPSubnetForTests, Tags: tags}).Extract()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			waitActive(t, sc.loadBalancer, lb.ID)
			if err := loadbalancers.Delete(ctx, sc.loadBalancer, lb.ID, loadbalancers.DeleteOpts{Cascade: true}).ExtractErr(); err != nil {
				t.Error(err)
			}
		})
		waitActive(t, sc.loadBalancer, lb.ID)
		lb, err = loadbalancers.Get(ctx, sc.loadBalancer, lb.ID).Extract()
		if err != nil {
			t.Fatal(err)
		}
		return lb
	}
	without := func(tags []string, drop string) []string {
		return slices.DeleteFunc(slices.Clone(tags), func(t string) bool { return t == drop })
	}
	tagsOf := func(id string) []string {
		waitActive(t, sc.loadBalancer, id)
		lb, err := loadbalancers.Get(ctx, sc.loadBalancer, id).Extract()
		if err != nil {
			t.Fatal(err)
		}
		out := slices.Clone(lb.Tags)
		slices.Sort(out)
		return out
	}
	asRetry := func(err error) error {
		if re := (*api.RetryError)(nil); errors.As(err, &re) {
			return nil
		}
		return err
	}
	svcA, svcB := newService("a"), newService("b")
	tags := []string{"mccm-cluster=" + c.lb.clusterID, "mccm-shared-test-a", "mccm-shared-test-b"}

	t.Run("one after the other", func(t *testing.T) {
		stale := create(tags)
		if _, err := c.lb.retagShared(ctx, sc, svcA, stale, without(stale.Tags, "mccm-shared-test-a"), "left by", nil); asRetry(err) != nil {
			t.Fatal(err)
		}
		waitActive(t, sc.loadBalancer, stale.ID)
		written, err := c.lb.retagShared(ctx, sc, svcB, stale, without(stale.Tags, "mccm-shared-test-b"), "left by", nil)
		if asRetry(err) != nil {
			t.Fatal(err)
		}
		want := []string{"mccm-cluster=" + c.lb.clusterID}
		if got := tagsOf(stale.ID); !slices.Equal(got, want) || !slices.Equal(written, want) {
			t.Errorf("tags %v (written %v), want %v: a Service's tag came back", got, written, want)
		}
	})
	t.Run("at once", func(t *testing.T) {
		stale := create(tags)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, leave := range []struct {
			svc *corev1.Service
			tag string
		}{{svcA, "mccm-shared-test-a"}, {svcB, "mccm-shared-test-b"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 60 {
					_, err := c.lb.retagShared(ctx, sc, leave.svc, stale, without(stale.Tags, leave.tag), "left by", nil)
					if err == nil || !strings.Contains(err.Error(), " is PENDING") {
						errs[i] = asRetry(err)
						return
					}
					time.Sleep(200 * time.Millisecond)
				}
				errs[i] = errors.New("the load balancer never came back to ACTIVE")
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if got, want := tagsOf(stale.ID), []string{"mccm-cluster=" + c.lb.clusterID}; !slices.Equal(got, want) {
			t.Errorf("tags %v, want %v: a Service's tag came back", got, want)
		}
	})
}
