package openstack

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/keymanager/v1/containers"
	"github.com/gophercloud/gophercloud/v2/openstack/keymanager/v1/secrets"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// The values of loadBalancer.tlsContainerStore.
const (
	tlsStoreBarbican = "barbican"
	tlsStoreExternal = "external"
)

// reasonTLSContainer is the event reason when a TLS container reference
// cannot be used.
const reasonTLSContainer = "TLSContainerUnavailable"

// barbicanRef splits a Barbican reference, .../containers/<uuid> or
// .../secrets/<uuid>, into its kind and ID.
func barbicanRef(ref string) (kind, id string, ok bool) {
	parts := strings.Split(strings.TrimSuffix(ref, "/"), "/")
	if len(parts) < 2 {
		return "", "", false
	}
	kind, id = parts[len(parts)-2], parts[len(parts)-1]
	return kind, id, (kind == "containers" || kind == "secrets") && uuidRE.MatchString(id)
}

// readTLSRef reads default-tls-container-ref: with the Barbican store a
// container or secret URL, else any reference Octavia's certificate
// manager reads (at most 255 characters, no spaces).
func readTLSRef(r *annotation.Reader, store string, out *string) {
	var v string
	if !r.String(AnnotationDefaultTLSContainerRef, &v) {
		return
	}
	switch {
	case len(v) > maxNameLength || strings.ContainsAny(v, " \t\n"):
		r.Invalid(AnnotationDefaultTLSContainerRef, v, fmt.Sprintf("must be a reference of at most %d characters without spaces", maxNameLength))
	case store == tlsStoreBarbican:
		if _, _, ok := barbicanRef(v); !ok {
			r.Invalid(AnnotationDefaultTLSContainerRef, v, "must be a Barbican container or secret URL, https://<barbican>/v1/containers/<uuid> or .../v1/secrets/<uuid> (`openstack secret container list`); with another certificate store set loadBalancer.tlsContainerStore: external")
			return
		}
		*out = v
	default:
		*out = v
	}
}

// checkTLSRef makes sure a TLS container reference exists before a
// listener is created or changed to use it (with the Barbican store): a
// missing one, or no Barbican to ask, is a user error, and nothing is
// changed.
func (l *LoadBalancer) checkTLSRef(ctx context.Context, sc *serviceClients, ref string) error {
	if l.settings.TLSContainerStore != tlsStoreBarbican {
		return nil
	}
	if sc.keyManager == nil {
		return backends.NewUserError(reasonTLSContainer, fmt.Errorf("annotation %s=%q: the cloud's catalog has no key manager (Barbican) to read the container from: add Barbican, set endpoints.keyManager, or set loadBalancer.tlsContainerStore: external if Octavia reads certificates elsewhere", AnnotationDefaultTLSContainerRef, ref))
	}
	kind, id, _ := barbicanRef(ref)
	var err error
	if kind == "containers" {
		_, err = containers.Get(ctx, sc.keyManager, id).Extract()
	} else {
		_, err = secrets.Get(ctx, sc.keyManager, id).Extract()
	}
	if gophercloud.ResponseCodeIs(err, http.StatusNotFound) || gophercloud.ResponseCodeIs(err, http.StatusForbidden) {
		return backends.NewUserError(reasonTLSContainer, fmt.Errorf("annotation %s=%q: Barbican has no such %s the backend's user may read (%w): create it or grant the user read access", AnnotationDefaultTLSContainerRef, ref, strings.TrimSuffix(kind, "s"), err))
	}
	if err != nil {
		return fmt.Errorf("reading TLS %s %s: %w", strings.TrimSuffix(kind, "s"), id, err)
	}
	return nil
}
