// Package testenv is test support shared by the operator's envtest suite,
// its scale benchmark and its tests against real builders: a real
// kube-apiserver and etcd (envtest) with the operator's CRDs and scheme, a
// manager on it for the reconcilers, and waiting for a condition.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// RequireAllTests is the variable make test sets: there a test that
// cannot run here (a binary or a privilege missing) fails, naming what is
// missing, instead of skipping; a plain go test skips it, saying why.
const RequireAllTests = "EB_REQUIRE_ALL_TESTS"

// Unavailable skips t, saying why, or fails it under make test
// (RequireAllTests set).
func Unavailable(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv(RequireAllTests) != "" {
		t.Fatalf("%s; %s is set (make test): every test must run", reason, RequireAllTests)
	}
	t.Skip(reason)
}

// MadeAssets is the newest set of envtest binaries make built under
// repoRoot/bin (k8s-<version>-etcd-<version>-<hash>, etcd written last),
// or that pattern if there is none, for a message to name.
func MadeAssets(repoRoot string) string {
	builds, _ := filepath.Glob(filepath.Join(repoRoot, "bin", "k8s-*-etcd-*"))
	newest, newestTime := filepath.Join(repoRoot, "bin", "k8s-*-etcd-*"), time.Time{}
	for _, dir := range builds {
		if strings.HasSuffix(dir, ".tmp") { // a build under way
			continue
		}
		if info, err := os.Stat(filepath.Join(dir, "etcd")); err == nil && info.ModTime().After(newestTime) {
			newest, newestTime = dir, info.ModTime()
		}
	}
	return newest
}

// StartForTest starts an Env for t with the CRDs of the repository at
// repoRoot, from KUBEBUILDER_ASSETS or else the binaries make built there,
// and stops it when t ends. Without the binaries t is Unavailable, saying
// how to get them.
func StartForTest(t testing.TB, repoRoot string) *Env {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = MadeAssets(repoRoot)
	}
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		Unavailable(t, "no kube-apiserver in "+assets+": make test-operator builds the envtest binaries")
	}
	env, err := Start(assets, filepath.Join(repoRoot, "config", "crd", "bases"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	return env
}

// HelmTemplate renders the operator's chart of the repository at repoRoot
// with the given --set values, with the helm make built there; without it
// t is Unavailable, saying how to get it.
func HelmTemplate(t testing.TB, repoRoot string, set ...string) string {
	t.Helper()
	bins, _ := filepath.Glob(filepath.Join(repoRoot, "bin", "helm-*", "helm"))
	if len(bins) == 0 {
		Unavailable(t, "no helm in "+filepath.Join(repoRoot, "bin", "helm-*")+" (make test-chart and make test-operator build it)")
	}
	args := []string{"template", "eb", filepath.Join(repoRoot, "charts", "eventbuilder-operator")}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := exec.Command(bins[0], args...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Env is a running kube-apiserver and etcd with the operator's CRDs.
type Env struct {
	env *envtest.Environment
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Scheme knows the Kubernetes types and the operator's.
	Scheme *runtime.Scheme
}

// Start starts kube-apiserver and etcd from the binaries in assets
// (KUBEBUILDER_ASSETS when empty) and installs the CRDs of the directories
// crds.
func Start(assets string, crds ...string) (*Env, error) {
	return StartWithAPIServerArgs(assets, nil, crds...)
}

// StartWithAPIServerArgs is Start with these kube-apiserver flags (name
// without the dashes, value) set beside envtest's.
func StartWithAPIServerArgs(assets string, args map[string]string, crds ...string) (*Env, error) {
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), ebv1.AddToScheme(scheme)); err != nil {
		return nil, err
	}
	env := &envtest.Environment{CRDDirectoryPaths: crds, ErrorIfCRDPathMissing: true, BinaryAssetsDirectory: assets}
	for name, value := range args {
		env.ControlPlane.GetAPIServer().Configure().Set(name, value)
	}
	cfg, err := env.Start()
	if err != nil {
		if assets == "" {
			assets = "KUBEBUILDER_ASSETS=" + os.Getenv("KUBEBUILDER_ASSETS")
		}
		return nil, fmt.Errorf("starting envtest (binaries from %s, CRDs from %v): %w", assets, crds, err)
	}
	return &Env{env: env, Config: cfg, Scheme: scheme}, nil
}

// KubeConfig is the content of a kubeconfig file for a new user of the
// API server, in groups (system:masters: an administrator), for a process
// outside this one (kube-scheduler, kube-controller-manager, kwok).
func (e *Env) KubeConfig(user string, groups ...string) ([]byte, error) {
	u, err := e.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return nil, err
	}
	return u.KubeConfig()
}

// Stop stops the API server and etcd.
func (e *Env) Stop() error { return e.env.Stop() }

// NewManager makes a manager on the API server with the given cache
// options (the operator's: controller.CacheOptions) and no metrics server.
func (e *Env) NewManager(c cache.Options) (ctrl.Manager, error) {
	return ctrl.NewManager(e.Config, ctrl.Options{Scheme: e.Scheme, Cache: c, Metrics: metricsserver.Options{BindAddress: "0"}})
}

// Eventually calls check until it returns nil, every 50 ms, failing t
// with check's last error if timeout passes first. It waits for what the
// operator or a builder does to become visible, never for time to pass.
func Eventually(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
