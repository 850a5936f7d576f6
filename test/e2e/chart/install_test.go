package chart

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestHelmInstallUpgradeUninstall installs the chart with helm itself on
// the real API server (there is no kubelet, so its pods never run; the
// objects are real), upgrades it with a changed cloud-config and checks the
// pod template changed (the pods roll), then uninstalls it and checks
// nothing is left.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	cp := suite.ControlPlane(t)
	ctx := ctxFor(t)
	const rel, ns = "mccm-install", "ccm-install"
	if _, err := cp.Kubectl(ctx, "create", "namespace", ns); err != nil {
		t.Fatal(err)
	}
	base := []string{"--kubeconfig", cp.AdminKubeconfig, "--namespace", ns, "-f", valuesFile("minimal"), "--set", "leaderElection.leaseName=" + rel}
	if out, err := runHelm(t, append([]string{"install", rel, chartDir(t)}, base...)...); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	full := rel + "-multicloud-ccm"
	dep, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, full, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Deployment is not there after helm install: %v", err)
	}
	sum := dep.Spec.Template.Annotations["checksum/config"]
	if _, err := cp.Client.CoreV1().Secrets(ns).Get(ctx, full+"-config", metav1.GetOptions{}); err != nil {
		t.Fatalf("the cloud-config Secret is not there: %v", err)
	}
	if _, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, full, metav1.GetOptions{}); err != nil {
		t.Fatalf("the PodDisruptionBudget is not there: %v", err)
	}
	// Upgrade with the same values: the pod template stays.
	if out, err := runHelm(t, append([]string{"upgrade", rel, chartDir(t)}, base...)...); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	dep, err = cp.Client.AppsV1().Deployments(ns).Get(ctx, full, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := dep.Spec.Template.Annotations["checksum/config"]; got != sum {
		t.Errorf("an upgrade with the same values changed the checksum %s -> %s (the pods would roll for nothing)", sum, got)
	}
	// A config change rolls the pods and reaches the Secret.
	if out, err := runHelm(t, append([]string{"upgrade", rel, chartDir(t)}, append(base, "--set", "config.clusterID=prod-2")...)...); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	dep, err = cp.Client.AppsV1().Deployments(ns).Get(ctx, full, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := dep.Spec.Template.Annotations["checksum/config"]; got == sum {
		t.Errorf("config.clusterID changed but the pod template's checksum stayed %s", sum)
	}
	sec, err := cp.Client.CoreV1().Secrets(ns).Get(ctx, full+"-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sec.Data["cloud-config.yaml"]), "clusterID: prod-2") {
		t.Errorf("the Secret does not hold the new config:\n%s", sec.Data["cloud-config.yaml"])
	}
	// NOTES tell how to check the install.
	notes, err := runHelm(t, "status", rel, "--kubeconfig", cp.AdminKubeconfig, "--namespace", ns)
	if err != nil || !strings.Contains(notes, "get lease "+rel) || !strings.Contains(notes, "uninitialized") {
		t.Errorf("helm status NOTES should tell how to check the CCM (%v):\n%s", err, notes)
	}
	if out, err := runHelm(t, "uninstall", rel, "--kubeconfig", cp.AdminKubeconfig, "--namespace", ns, "--wait"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	if _, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, full, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Deployment is still there after uninstall: %v", err)
	}
	if _, err := cp.Client.RbacV1().ClusterRoles().Get(ctx, full, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ClusterRole is still there after uninstall: %v", err)
	}
	if _, err := cp.Client.RbacV1().Roles("kube-system").Get(ctx, full, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the kube-system Role is still there after uninstall: %v", err)
	}
}
