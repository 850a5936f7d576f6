package openstack

import (
	"context"
	"errors"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
)

// TestStandbyLogsIn: with the mutation gate closed (a standby replica, or
// a leader past its lease) the backend still logs in to Keystone (a POST
// of /v3/auth/tokens, under no catalogued endpoint) and gets its service
// clients. Fails if Keystone's login is gated. Not parallel: the gate is
// the process's.
func TestStandbyLogsIn(t *testing.T) {
	f := NewFakeOpenStack(t)
	old := cloudapi.SetMutationGate(func(context.Context) error { return errors.New("standby") })
	t.Cleanup(func() { cloudapi.SetMutationGate(old) })
	conn, err := newConnector("os-standby", f.Settings(t))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := conn.get(context.Background())
	if err != nil {
		t.Fatalf("logging in with the gate closed: %v", err)
	}
	if sc.compute == nil {
		t.Fatal("no compute client after the login")
	}
}
