package router

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestClassifyVSphere classifies the errors govmomi returns from vcsim:
// refused credentials, a call without a session, a missing privilege (a
// fault vcsim injects), a VM that is gone, and a task fault of no class;
// each wrapped as the vSphere backend wraps them.
func TestClassifyVSphere(t *testing.T) {
	ctx := context.Background()
	model := simulator.VPX()
	t.Cleanup(model.Remove)
	if err := model.Create(); err != nil {
		t.Fatal(err)
	}
	server := model.Service.NewServer()
	t.Cleanup(server.Close)
	vim := simClient(ctx, t, server.URL)
	vm := model.Map().Any("VirtualMachine").(*simulator.VirtualMachine)
	model.Service.AddFaultRule(&simulator.FaultInjectionRule{
		MethodName: "PowerOffVM_Task", ObjectType: "VirtualMachine", ObjectName: "*",
		Probability: 1, FaultType: simulator.FaultTypeNoPermission, Enabled: true,
	})

	cases := map[string]struct {
		err  error
		want errorClass
	}{
		"InvalidLogin": {
			err:  backends.NewUserError("VSphereLoginFailed", fmt.Errorf("refused: %w", login(ctx, t, server.URL, "nobody", ""))),
			want: classAuth,
		},
		"NotAuthenticated": {err: powerOn(ctx, t, simClient(ctx, t, server.URL, withoutLogin), vm.Reference()), want: classAuth},
		"NoPermission":     {err: powerOff(ctx, vim, vm.Reference()), want: classAuth},
		"ManagedObjectNotFound": {
			err:  property.DefaultCollector(vim).RetrieveOne(ctx, types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-gone"}, []string{"name"}, &mo.VirtualMachine{}),
			want: classNotFound,
		},
		"InvalidPowerState task fault": {err: powerOn(ctx, t, vim, vm.Reference()), want: classOther},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("vcsim returned no error")
			}
			err := fmt.Errorf("vCenter vc1: %w", tc.err)
			if got := classify(err); got != tc.want {
				t.Errorf("classify(%v) = %s (fault %q), want %s", err, got, vimFaultName(err), tc.want)
			}
		})
	}
}

// TestVimFaultName: faults govmomi builds in memory (SOAP detail by value
// or by pointer, VIM faults, joined errors); errors of other packages with
// a Fault method are not asked.
func TestVimFaultName(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{soap.WrapSoapFault(&soap.Fault{Detail: struct {
			Fault types.AnyType `xml:",any,typeattr"` //nolint:staticcheck // soap.Fault's own Detail type: govmomi's XML decoder reads typeattr.
		}{Fault: types.NoPermission{}}}), "NoPermission"},
		{soap.WrapVimFault(&types.ManagedObjectNotFound{}), "ManagedObjectNotFound"},
		{errors.Join(errors.New("x"), fmt.Errorf("y: %w", soap.WrapVimFault(&types.InvalidLogin{}))), "InvalidLogin"},
		{soap.WrapSoapFault(&soap.Fault{}), ""},
		{notGovmomi{}, ""},
		{errors.New("NotAuthenticated"), ""},
	}
	for _, tc := range cases {
		if got := vimFaultName(tc.err); got != tc.want {
			t.Errorf("vimFaultName(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// notGovmomi has a Fault method like govmomi's errors, in another package.
type notGovmomi struct{}

func (notGovmomi) Error() string                { return "not govmomi" }
func (notGovmomi) Fault() types.BaseMethodFault { return &types.NotAuthenticated{} }

// TestAuthFaultMarksDown: refused credentials are no answer even when the
// backend reports them as the user's to fix: three in a row make the
// backend down.
func TestAuthFaultMarksDown(t *testing.T) {
	refused := backends.NewUserError("VSphereLoginFailed", fmt.Errorf("logging in: %w", soap.WrapVimFault(&types.InvalidLogin{})))
	if answered(refused) {
		t.Errorf("answered(%v) = true, want false", refused)
	}
	if other := backends.NewUserError("BadThing", errors.New("fix it")); !answered(other) {
		t.Errorf("answered(%v) = false, want true", other)
	}
}

type simClientOption func(*soap.Client) bool

// withoutLogin makes simClient skip the login.
func withoutLogin(*soap.Client) bool { return false }

func simClient(ctx context.Context, t *testing.T, u *url.URL, opts ...simClientOption) *vim25.Client {
	t.Helper()
	sc := soap.NewClient(u, true)
	vim, err := vim25.NewClient(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		if !o(sc) {
			return vim
		}
	}
	if err := session.NewManager(vim).Login(ctx, u.User); err != nil {
		t.Fatal(err)
	}
	return vim
}

func login(ctx context.Context, t *testing.T, u *url.URL, user, password string) error {
	return session.NewManager(simClient(ctx, t, u, withoutLogin)).Login(ctx, url.UserPassword(user, password))
}

func powerOn(ctx context.Context, t *testing.T, vim *vim25.Client, ref types.ManagedObjectReference) error {
	t.Helper()
	task, err := object.NewVirtualMachine(vim, ref).PowerOn(ctx)
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}

func powerOff(ctx context.Context, vim *vim25.Client, ref types.ManagedObjectReference) error {
	task, err := object.NewVirtualMachine(vim, ref).PowerOff(ctx)
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}
