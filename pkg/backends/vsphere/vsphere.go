// Package vsphere is the vSphere backend: VMs in one or more vCenters are
// nodes. It provides instances (InstancesV2) and zones, not load balancers
// or routes.
//
// A node's providerID is vsphere://<bios-uuid> in lower case, exactly as the
// upstream vSphere provider writes it, so existing nodes and the vSphere CSI
// driver keep matching. A node without one is found by its
// status.nodeInfo.systemUUID (in either byte order), then by the guest's DNS
// name, then by its addresses, in every vCenter at once.
//
// Lookups are served from a per-vCenter cache of the whole VM inventory,
// filled by one property-collector retrieval per datacenter and one tagging
// call, refreshed when older than refreshInterval, in the background, and
// when a VM is not found; concurrent refreshes of a vCenter are merged. A
// full node sweep therefore costs a constant number of vCenter round-trips.
//
// A node is gone only when every configured vCenter answered without its
// VM, no VM vCenter returned without its configuration (a datastore
// outage) may be its VM, and the vCenter and datacenter recorded on the
// node at initialisation (LabelServer, LabelDatacenter) are configured.
// Anything else is an error, which leaves the Node in place.
package vsphere

import (
	"context"
	"errors"
	"fmt"
	"time"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	snapcache "github.com/multicloud-ccm/multicloud-ccm/internal/snapshot"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/vsphere/vsconfig"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/vsphere/vsid"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
)

const (
	// Type is the backend type in the cloud-config file.
	Type = vsconfig.Type
	// Scheme is the providerID scheme of vSphere nodes (vsid.Scheme).
	// Never change it.
	Scheme = vsid.Scheme
	// ProviderIDPrefix starts every vSphere providerID, followed by the
	// VM's BIOS UUID in lower case (vsid.ProviderIDPrefix). Never change it.
	ProviderIDPrefix = vsid.ProviderIDPrefix
)

func init() {
	backends.Register(backends.Registration{Type: Type, Scheme: Scheme, Parse: vsconfig.ParseSection, New: New, ClassifyError: ClassifyError})
}

// Cloud is a vSphere backend. It is a cloudprovider.Interface offering only
// InstancesV2.
type Cloud struct {
	backends.InstancesV2Only

	name     string
	settings *Settings
	vcenters []*vcenter
}

var (
	_ cloudprovider.Interface   = (*Cloud)(nil)
	_ cloudprovider.InstancesV2 = (*Cloud)(nil)
)

// New builds a vSphere backend from its settings (a *Settings). It reads
// the credentials but does not contact vCenter: an unreachable vCenter makes
// lookups fail later, not the start.
func New(ctx context.Context, o backends.Options) (cloudprovider.Interface, error) {
	s, ok := o.Settings.(*Settings)
	if !ok || s == nil {
		return nil, fmt.Errorf("settings are %T, want *vsphere.Settings", o.Settings)
	}
	c := &Cloud{name: o.Name, settings: s}
	log := klog.FromContext(ctx).WithValues("backend", o.Name)
	tr := &tagReader{zoneCategory: s.ZoneCategory, regionCategory: s.RegionCategory, path: s.FieldPath().String()}
	var errs []error
	for i := range s.VCenters {
		vc, err := newVCenter(o.Name, s, i, tr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if vc.cfg.Insecure {
			log.Info("WARNING: TLS certificate verification is off for this vCenter (insecure: true); set caFile or thumbprint instead", "vcenter", vc.name)
		}
		c.vcenters = append(c.vcenters, vc)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

func newVCenter(backend string, s *Settings, i int, tr *tagReader) (*vcenter, error) {
	cfg := &s.VCenters[i]
	p := s.FieldPath().Child("vcenters").Index(i)
	if cfg.URL() == nil {
		return nil, fmt.Errorf("%s.server: settings were not validated", p)
	}
	user, err := cfg.Username.Resolve()
	if err != nil {
		return nil, fmt.Errorf("%s.username: %w", p, err)
	}
	password, err := cfg.Password.Resolve()
	if err != nil {
		return nil, fmt.Errorf("%s.password: %w", p, err)
	}
	dcRecords := make([]string, 0, len(cfg.Datacenters))
	for _, dc := range cfg.Datacenters {
		dcRecords = append(dcRecords, datacenterRecord(dc))
	}
	v := &vcenter{
		name: cfg.URL().Host, backend: backend, cfg: cfg, path: p.String(),
		record: serverRecord(cfg.URL()), dcRecords: dcRecords,
		user: user, password: password,
		timeout: s.RequestTimeout.Duration, tags: tr,
		budget: cloudapi.NewBudget(backend, s.RateLimits, cloudapi.VCenterDefaults),
	}
	// Lookups say how fresh an inventory they need (notBefore); the TTL
	// and miss interval are the refresh interval, which keepFresh keeps.
	v.inv = snapcache.New(snapcache.Config{
		Backend:        backend,
		Source:         cfg.URL().Host,
		TTL:            s.RefreshInterval.Duration,
		MissInterval:   s.RefreshInterval.Duration,
		FailureBackoff: min(failureBackoff, s.RefreshInterval.Duration),
		ListTimeout:    s.RequestTimeout.Duration,
	}, v.refresh)
	return v, nil
}

// Initialize starts refreshing every vCenter's inventory in the background
// until stop closes, which also keeps the sessions alive.
func (c *Cloud) Initialize(_ cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	ctx = klog.NewContext(ctx, klog.Background().WithValues("backend", c.name))
	go func() {
		<-stop
		cancel()
		c.close(context.Background())
	}()
	for _, v := range c.vcenters {
		go c.keepFresh(ctx, v)
	}
}

// keepFresh refreshes v's inventory every refresh interval, unless a lookup
// refreshed it less than half an interval ago.
func (c *Cloud) keepFresh(ctx context.Context, v *vcenter) {
	interval := c.settings.RefreshInterval.Duration
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := v.snapshotSince(ctx, time.Now().Add(-interval/2)); err != nil {
				klog.FromContext(ctx).Error(err, "Refreshing the vCenter inventory failed", "vcenter", v.name)
			}
		}
	}
}

// close logs out of every vCenter.
func (c *Cloud) close(ctx context.Context) {
	for _, v := range c.vcenters {
		v.logout(ctx)
	}
}

// LoadBalancer is not offered: another backend provides load balancers.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return nil, false }

// InstancesV2 returns the backend itself.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c, true }

// Routes is not offered.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) { return nil, false }

// ProviderName is the backend type, vsphere.
func (c *Cloud) ProviderName() string { return Type }

// newUserError is a user-fixable error with a formatted message.
func newUserError(reason, format string, args ...any) error {
	return backends.NewUserError(reason, fmt.Errorf(format, args...))
}

// joinErrors joins errs into one error whose message lists them with "; ".
func joinErrors(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return &joined{errs: errs}
}

type joined struct{ errs []error }

func (j *joined) Error() string {
	var b []byte
	for i, e := range j.errs {
		if i > 0 {
			b = append(b, "; "...)
		}
		b = append(b, e.Error()...)
	}
	return string(b)
}

func (j *joined) Unwrap() []error { return j.errs }
