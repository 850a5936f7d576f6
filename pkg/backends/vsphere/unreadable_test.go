package vsphere

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// askAll asks InstanceExists, InstanceShutdown and InstanceMetadata.
func askAll(c *Cloud, node *corev1.Node) (exists bool, existsErr error, shutdownErr error, metadataErr error) {
	ctx := context.Background()
	exists, existsErr = c.InstanceExists(ctx, node)
	_, shutdownErr = c.InstanceShutdown(ctx, node)
	_, metadataErr = c.InstanceMetadata(ctx, node)
	return exists, existsErr, shutdownErr, metadataErr
}

// TestUnreadableVMIsNeverGone: a VM vCenter returns without its
// configuration (datastore inaccessible) is not gone; every question about
// it is an error, and the other VMs answer as before.
func TestUnreadableVMIsNeverGone(t *testing.T) {
	s := startSim(t)
	vms := guestAll(t, s, 1)
	c := newCloud(t, []*sim{s})
	ctx := context.Background()
	node := newNode("n0", withVM(vms[0]))
	if ok, err := c.InstanceExists(ctx, node); err != nil || !ok {
		t.Fatalf("InstanceExists before = %v, %v", ok, err)
	}
	gone := vms[2]
	s.destroy(t, gone)
	restore := s.makeUnreadable(t, vms[0])
	c.vcenters[0].invalidate()

	exists, eerr, serr, merr := askAll(c, node)
	if eerr == nil {
		t.Errorf("InstanceExists of an unreadable VM = %v, nil; want an error", exists)
	}
	for op, err := range map[string]error{"InstanceExists": eerr, "InstanceShutdown": serr, "InstanceMetadata": merr} {
		if err == nil {
			t.Errorf("%s of an unreadable VM succeeded; want an error", op)
			continue
		}
		if ue, ok := backends.AsUserError(err); !ok || ue.Reason != ReasonVMUnreadable || !strings.Contains(err.Error(), vms[0].uuid) {
			t.Errorf("%s error %q: want a %s user error naming the VM's UUID", op, err, ReasonVMUnreadable)
		}
	}
	// A no-providerID node whose system UUID is the unreadable VM's is not
	// claimed by another VM, nor called unknown.
	claim := newNode(strings.ToLower(vms[0].name), withSystemUUID(vms[0].uuid))
	if ok, err := c.InstanceExists(ctx, claim); err == nil {
		t.Errorf("InstanceExists of a node without providerID while its VM is unreadable = %v, nil; want an error", ok)
	}
	// Nor is a node claimed by its name while a VM that may match it too
	// cannot be read.
	byName := newNode(strings.ToLower(vms[1].name))
	if ok, err := c.InstanceExists(ctx, byName); err == nil {
		t.Errorf("InstanceExists of a node matching by DNS name while a VM is unreadable = %v, nil; want an error", ok)
	}
	if md, err := c.InstanceMetadata(ctx, byName); err == nil {
		t.Errorf("InstanceMetadata of a node matching by DNS name while a VM is unreadable = %+v, nil; want an error", md)
	}
	// The unreadable VM is known (by its reference) not to be the others.
	if ok, err := c.InstanceExists(ctx, newNode("n1", withVM(vms[1]))); err != nil || !ok {
		t.Errorf("InstanceExists of a readable VM = %v, %v; want true", ok, err)
	}
	if ok, err := c.InstanceExists(ctx, newNode("gone", withVM(gone))); err != nil || ok {
		t.Errorf("InstanceExists of a destroyed VM beside a known unreadable one = %v, %v; want false", ok, err)
	}

	// A backend that never read the VM (restarted during the outage)
	// cannot tell which node's VM it is: no node is gone.
	fresh := newCloud(t, []*sim{s})
	if ok, err := fresh.InstanceExists(ctx, newNode("gone", withVM(gone))); err == nil {
		t.Errorf("InstanceExists of a destroyed VM beside an unknown unreadable one = %v, nil; want an error", ok)
	}
	if _, err := fresh.InstanceExists(ctx, node); err == nil {
		t.Error("InstanceExists of an unreadable VM never read = nil error; want an error")
	}

	restore()
	c.vcenters[0].invalidate()
	if ok, err := c.InstanceExists(ctx, node); err != nil || !ok {
		t.Errorf("InstanceExists once readable again = %v, %v; want true", ok, err)
	}
	if ok, err := c.InstanceExists(ctx, byName); err != nil || !ok {
		t.Errorf("InstanceExists of the node matching by DNS name once every VM is readable = %v, %v; want true", ok, err)
	}
}

// TestShutdownOnFreshEvidence: a VM powered on again is never reported
// shut down from an inventory taken while it was off.
func TestShutdownOnFreshEvidence(t *testing.T) {
	s := startSim(t)
	vms := guestAll(t, s, 1)
	c := newCloud(t, []*sim{s}) // refresh interval 1m: the inventory stays
	ctx := context.Background()
	node := newNode("n", withVM(vms[0]))
	s.powerOff(t, vms[0])
	if off, err := c.InstanceShutdown(ctx, node); err != nil || !off {
		t.Fatalf("InstanceShutdown after power-off = %v, %v; want true", off, err)
	}
	task, err := vms[0].obj.PowerOn(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	if off, err := c.InstanceShutdown(ctx, node); err != nil || off {
		t.Errorf("InstanceShutdown right after power-on = %v, %v; want false", off, err)
	}
}

// TestControllersUnreadableVMKeepsNode drives the upstream controllers: a
// datastore outage that leaves a VM without its configuration deletes no
// Node, while a destroyed VM's Node is still deleted.
func TestControllersUnreadableVMKeepsNode(t *testing.T) {
	s := startSim(t)
	vms := guestAll(t, s, 1)
	c := newCloud(t, []*sim{s}, fastRefresh)
	k := runControllers(t, c,
		kubeletNode("unreadable", withVM(vms[0])),
		kubeletNode("gone", withVM(vms[1])),
		kubeletNode("fine", withVM(vms[2])),
	)
	eventually(t, "nodes initialised", func() error {
		for _, name := range []string{"unreadable", "gone", "fine"} {
			if n, _ := k.node(t, name); initialised(n) != nil {
				return initialised(n)
			}
		}
		return nil
	})
	restore := s.makeUnreadable(t, vms[0])
	s.destroy(t, vms[1])
	eventually(t, "node of the destroyed VM deleted", func() error {
		if _, ok := k.node(t, "gone"); ok {
			return fmt.Errorf("node gone still exists")
		}
		return nil
	})
	// Many lifecycle rounds (300 ms) and inventory refreshes (1 s).
	time.Sleep(3 * time.Second)
	for _, name := range []string{"unreadable", "fine"} {
		if _, ok := k.node(t, name); !ok {
			t.Fatalf("node %s deleted while its VM was unreadable", name)
		}
	}
	restore()
	time.Sleep(1500 * time.Millisecond)
	if _, ok := k.node(t, "unreadable"); !ok {
		t.Fatal("node unreadable deleted after its VM became readable again")
	}
}

// TestShutdownOfDisconnectedVMIsAnError: while vCenter has lost the VM's
// host, its power state is the last one known: InstanceShutdown is an
// error rather than a stale answer; the VM still exists.
func TestShutdownOfDisconnectedVMIsAnError(t *testing.T) {
	s := startSim(t)
	vms := guestAll(t, s, 1)
	c := newCloud(t, []*sim{s})
	ctx := context.Background()
	s.powerOff(t, vms[0])
	sctx := s.model.Service.Context
	obj := sctx.Map.Get(vms[0].obj.Reference()).(*simulator.VirtualMachine)
	sctx.WithLock(obj, func() { obj.Runtime.ConnectionState = types.VirtualMachineConnectionStateDisconnected })
	node := newNode("n", withVM(vms[0]))
	if off, err := c.InstanceShutdown(ctx, node); err == nil || !strings.Contains(err.Error(), "disconnected") {
		t.Errorf("InstanceShutdown of a VM on a disconnected host = %v, %v; want an error saying so", off, err)
	}
	if ok, err := c.InstanceExists(ctx, node); err != nil || !ok {
		t.Errorf("InstanceExists of a VM on a disconnected host = %v, %v; want true", ok, err)
	}
}
