package vsphere

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/klog/v2"

	snapcache "github.com/multicloud-ccm/multicloud-ccm/internal/snapshot"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
)

// Event reasons of user-fixable vCenter problems.
const (
	// ReasonLoginFailed: the vCenter refused the configured credentials.
	ReasonLoginFailed = "VSphereLoginFailed"
	// ReasonDatacenterNotFound: a configured datacenter does not exist.
	ReasonDatacenterNotFound = "VSphereDatacenterNotFound"
	// ReasonTLSConfig: the configured CA file cannot be used.
	ReasonTLSConfig = "VSphereTLSConfig"
)

// userAgent identifies the backend's sessions in vCenter's session list.
const userAgent = "multicloud-ccm/vsphere"

// vcenter is one vCenter: its session, kept and re-established on expiry,
// and a cache of its VM inventory, refreshed at most once at a time.
type vcenter struct {
	// name is the server's host[:port], used in errors and VMs.
	name string
	// record and dcRecords are the LabelServer value of the vCenter and
	// the LabelDatacenter values of its configured datacenters.
	record    string
	dcRecords []string
	cfg       *VCenter
	// path names the vCenter's config entry in errors.
	path     string
	user     string
	password string
	timeout  time.Duration
	tags     *tagReader

	connMu sync.Mutex
	conn   *connection

	// inv caches the inventory: one retrieval at a time, bounded by
	// timeout, and for failureBackoff after a failed one lookups get its
	// error at once instead of each waiting for a vCenter that is down or
	// stuck.
	inv *snapcache.Cache[*snapshot]

	mu sync.Mutex
	// known maps every VM of the last inventory to its BIOS UUID, so a VM
	// that turns unreadable is still known by its UUID.
	known map[types.ManagedObjectReference]string

	// backend names the backend in metrics.
	backend string
	// budget is the session's API budget: it outlives re-logins, so a
	// session re-established does not start with a full bucket.
	budget *cloudapi.Budget
}

// connection is an authenticated session with the resolved datacenters.
type connection struct {
	vim  *vim25.Client
	rest *rest.Client
	dcs  []dcRef
	cats categories
	// tagErr is why the tagging session or categories are not usable; they
	// are tried again at the next refresh.
	tagErr error
}

// snapshotSince returns the inventory, refreshing it unless the cached one
// was retrieved from notBefore on. Concurrent callers share one refresh; a
// caller whose deadline passes returns while the refresh carries on.
func (v *vcenter) snapshotSince(ctx context.Context, notBefore time.Time) (*snapshot, error) {
	s, err := v.inv.Since(ctx, notBefore)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("vCenter %s: inventory: %w", v.name, err)
	}
	return s, err
}

// failureBackoff is how long a failed refresh is answered from memory. It
// is capped at the refresh interval.
const failureBackoff = 5 * time.Second

// invalidate forgets the cached inventory, so the next lookup refreshes.
func (v *vcenter) invalidate() { v.inv.Invalidate() }

// refresh retrieves the inventory, re-establishing an expired session once.
func (v *vcenter) refresh(ctx context.Context) (*snapshot, error) {
	started := time.Now()
	conn, inv, err := v.retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("vCenter %s: %w", v.name, err)
	}
	v.mu.Lock()
	v.known = inv.recall(v.known)
	v.mu.Unlock()
	s := newSnapshot(started, inv)
	s.topology, s.tagErr = v.readTopology(ctx, conn, inv.vms)
	if s.tagErr != nil {
		klog.FromContext(ctx).Error(s.tagErr, "Reading zones and regions failed", "vcenter", v.name)
	}
	if len(inv.unreadable) > 0 {
		klog.FromContext(ctx).V(2).Info("vCenter returned VMs without their configuration (datastore inaccessible?): no node is called gone while one of them may be its VM", "vcenter", v.name, "vms", unreadableNames(inv.unreadable))
	}
	return s, nil
}

func (v *vcenter) retrieve(ctx context.Context) (*connection, *inventory, error) {
	conn, err := v.connection(ctx)
	if err != nil {
		return nil, nil, err
	}
	inv, err := retrieveInventory(ctx, conn.vim, v.name, conn.dcs)
	if err != nil && fault.Is(err, &types.NotAuthenticated{}) {
		klog.FromContext(ctx).V(2).Info("vCenter session expired, logging in again", "vcenter", v.name)
		v.drop(conn)
		if conn, err = v.connection(ctx); err != nil {
			return nil, nil, err
		}
		inv, err = retrieveInventory(ctx, conn.vim, v.name, conn.dcs)
	}
	if err != nil {
		return nil, nil, err
	}
	return conn, inv, nil
}

// connection returns the current session, logging in when there is none.
func (v *vcenter) connection(ctx context.Context) (*connection, error) {
	v.connMu.Lock()
	defer v.connMu.Unlock()
	if v.conn != nil {
		return v.conn, nil
	}
	c, err := v.connect(ctx)
	if err != nil {
		return nil, err
	}
	v.conn = c
	return c, nil
}

// drop forgets conn if it is still the current session.
func (v *vcenter) drop(conn *connection) {
	v.connMu.Lock()
	defer v.connMu.Unlock()
	if v.conn == conn {
		v.conn = nil
	}
}

func (v *vcenter) connect(ctx context.Context) (*connection, error) {
	sc := soap.NewClient(v.cfg.URL(), v.cfg.Insecure)
	sc.UserAgent = userAgent
	if v.cfg.CAFile != "" {
		if err := sc.SetRootCAs(v.cfg.CAFile); err != nil {
			return nil, newUserError(ReasonTLSConfig, "%s.caFile: %w", v.path, err)
		}
	}
	if v.cfg.Thumbprint != "" {
		sc.SetThumbprint(v.cfg.URL().Host, v.cfg.Thumbprint)
	}
	vim, err := v.newClient(ctx, sc)
	if err != nil {
		return nil, v.connectError(err)
	}
	err = session.NewManager(vim).Login(ctx, url.UserPassword(v.user, v.password))
	loginsTotal.WithLabelValues(v.backend, v.name, result(err)).Inc()
	if err != nil {
		return nil, v.loginError(err)
	}
	dcs, err := v.resolveDatacenters(ctx, vim)
	if err != nil {
		return nil, err
	}
	c := &connection{vim: vim, dcs: dcs}
	if v.tags.enabled() {
		c.rest = rest.NewClient(vim)
		c.rest.Transport = replayable{Next: &cloudapi.Transport{Next: c.rest.Transport, Budget: v.budget,
			DefaultAPI: cloudapi.APIVCenter, Mutating: vapiMutating, Session: vapiSession, Action: vapiActionName}}
		c.tagErr = v.loginTags(ctx, c)
	}
	return c, nil
}

// newClient makes the session's vim25 client, every call of which (the
// service content it reads first included) waits for the budget, is
// counted in multicloud_ccm_cloud_api_calls_total, and is retried on a
// throttling answer (soapBudget.Call).
func (v *vcenter) newClient(ctx context.Context, sc *soap.Client) (*vim25.Client, error) {
	sc.Transport = &retryAfterRecorder{Next: sc.Transport} // the http.Client under the SOAP client
	rt := &soapBudget{Next: sc, Budget: v.budget}
	var vim *vim25.Client
	err := rt.Call(ctx, "RetrieveServiceContent", false, func(ctx context.Context) (err error) {
		vim, err = vim25.NewClient(ctx, sc)
		return err
	})
	if err != nil {
		return nil, err
	}
	vim.RoundTripper = rt
	return vim, nil
}

// connectError makes a certificate that fails verification a user error
// saying how to trust it.
func (v *vcenter) connectError(err error) error {
	if soap.IsCertificateUntrusted(err) || strings.Contains(err.Error(), "thumbprint does not match") {
		how := "set caFile to the CA that signed it or thumbprint to its SHA-256 fingerprint"
		if v.cfg.Thumbprint != "" {
			how = "check thumbprint against the certificate's SHA-1 or SHA-256 fingerprint"
		} else if v.cfg.CAFile != "" {
			how = "check that caFile holds the CA that signed it"
		}
		return newUserError(ReasonTLSConfig, "%s: the certificate of vCenter %s is not trusted: %w; %s", v.path, v.name, err, how)
	}
	return fmt.Errorf("connecting: %w", err)
}

func (v *vcenter) loginError(err error) error {
	if fault.Is(err, &types.InvalidLogin{}) {
		return newUserError(ReasonLoginFailed, "%s: vCenter %s refused the login of user %q: %w; check the username and password", v.path, v.name, v.user, err)
	}
	return fmt.Errorf("logging in: %w", err)
}

// loginTags opens the tagging (vAPI) session and resolves the categories.
func (v *vcenter) loginTags(ctx context.Context, c *connection) error {
	if err := c.rest.Login(ctx, url.UserPassword(v.user, v.password)); err != nil {
		if isUnauthorized(err) {
			return newUserError(ReasonLoginFailed, "%s: the tagging service of vCenter %s refused the login of user %q: %w", v.path, v.name, v.user, err)
		}
		return fmt.Errorf("logging in to the tagging service: %w", err)
	}
	var cats categories
	err := vapiCall(ctx, func(ctx context.Context) (err error) {
		cats, err = v.tags.resolveCategories(ctx, tags.NewManager(c.rest), v.name)
		return err
	})
	if err != nil {
		return err
	}
	c.cats = cats
	return nil
}

// readTopology reads the zones and regions of vms, retrying the tagging
// session if it failed before or expired.
func (v *vcenter) readTopology(ctx context.Context, c *connection, vms []*vmInfo) (map[types.ManagedObjectReference]topology, error) {
	if !v.tags.enabled() {
		return map[types.ManagedObjectReference]topology{}, nil
	}
	v.connMu.Lock()
	defer v.connMu.Unlock()
	if c.tagErr != nil {
		if c.tagErr = v.loginTags(ctx, c); c.tagErr != nil {
			return nil, c.tagErr
		}
	}
	var topo map[types.ManagedObjectReference]topology
	read := func(ctx context.Context) (err error) {
		topo, err = v.tags.read(ctx, c.rest, c.cats, vms)
		return err
	}
	err := vapiCall(ctx, read)
	if err != nil && isUnauthorized(err) {
		if c.tagErr = v.loginTags(ctx, c); c.tagErr != nil {
			return nil, c.tagErr
		}
		err = vapiCall(ctx, read)
	}
	if err != nil {
		return nil, fmt.Errorf("vCenter %s: %w", v.name, err)
	}
	return topo, nil
}

// isUnauthorized reports whether a vAPI call failed for want of a session.
func isUnauthorized(err error) bool {
	var se *httpStatusError
	if errors.As(err, &se) && se.Status == http.StatusUnauthorized {
		return true
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if rest.IsStatusError(e, http.StatusUnauthorized) {
			return true
		}
	}
	return false
}

// vapiCall runs vAPI (tagging) calls and wraps their error with the HTTP
// status of the last answer when it was one of failure (an
// httpStatusError, for ClassifyError): govmomi's tags package formats the
// rest client's status error into its own with %s, so the status is only
// known to the session's transport (replayable records it).
func vapiCall(ctx context.Context, f func(context.Context) error) error {
	hint := &retryAfterHint{}
	err := f(context.WithValue(ctx, retryAfterKey{}, hint))
	if status := hint.status(); err != nil && status >= http.StatusBadRequest {
		return &httpStatusError{Status: status, Err: err}
	}
	return err
}

func (v *vcenter) resolveDatacenters(ctx context.Context, vim *vim25.Client) ([]dcRef, error) {
	f := find.NewFinder(vim, false)
	out := make([]dcRef, 0, len(v.cfg.Datacenters))
	for i, name := range v.cfg.Datacenters {
		dc, err := f.Datacenter(ctx, name)
		var nf *find.NotFoundError
		if errors.As(err, &nf) {
			return nil, newUserError(ReasonDatacenterNotFound, "%s.datacenters[%d]: datacenter %q not found in vCenter %s (it has: %s)", v.path, i, name, v.name, v.datacenterNames(ctx, f))
		}
		if err != nil {
			return nil, fmt.Errorf("finding datacenter %q: %w", name, err)
		}
		out = append(out, dcRef{Name: name, Ref: dc.Reference()})
	}
	return out, nil
}

func (v *vcenter) datacenterNames(ctx context.Context, f *find.Finder) string {
	dcs, err := f.DatacenterList(ctx, "*")
	if err != nil || len(dcs) == 0 {
		return "none found"
	}
	names := make([]string, 0, len(dcs))
	for _, dc := range dcs {
		names = append(names, dc.Name())
	}
	return strings.Join(names, ", ")
}

// logout ends the sessions, if any.
func (v *vcenter) logout(ctx context.Context) {
	v.connMu.Lock()
	c := v.conn
	v.conn = nil
	v.connMu.Unlock()
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	if c.rest != nil && c.tagErr == nil {
		_ = c.rest.Logout(ctx)
	}
	_ = session.NewManager(c.vim).Logout(ctx)
}

// powerState reads one VM's power state now, with its configuration: a VM
// that turned unreadable, disconnected or gone since the inventory was
// retrieved is an error (gone: errNotFound).
func (v *vcenter) powerState(ctx context.Context, vm *vmInfo) (types.VirtualMachinePowerState, error) {
	ctx, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	var o mo.VirtualMachine
	err := v.withSession(ctx, func(conn *connection) error {
		return property.DefaultCollector(conn.vim).RetrieveOne(ctx, vm.Ref, []string{"config.uuid", "runtime.powerState", "runtime.connectionState"}, &o)
	})
	switch {
	case fault.Is(err, &types.ManagedObjectNotFound{}):
		return "", fmt.Errorf("VM %s: %w", vm.Name, errNotFound)
	case err != nil:
		return "", fmt.Errorf("vCenter %s: reading the power state of VM %s: %w", v.name, vm.Name, err)
	case o.Config == nil || !strings.EqualFold(o.Config.Uuid, vm.UUID):
		return "", fmt.Errorf("vCenter %s: VM %s is unreadable (its configuration is unset: datastore inaccessible?) or no longer has BIOS UUID %s: its power state is not known", v.name, vm.Name, vm.UUID)
	}
	if err := checkConnected(vm.Name, o.Runtime.ConnectionState); err != nil {
		return "", err
	}
	return o.Runtime.PowerState, nil
}

// withSession calls f with the current session, logging in again once if
// the session expired.
func (v *vcenter) withSession(ctx context.Context, f func(*connection) error) error {
	conn, err := v.connection(ctx)
	if err != nil {
		return err
	}
	err = f(conn)
	if err != nil && fault.Is(err, &types.NotAuthenticated{}) {
		v.drop(conn)
		if conn, err = v.connection(ctx); err != nil {
			return err
		}
		err = f(conn)
	}
	return err
}
