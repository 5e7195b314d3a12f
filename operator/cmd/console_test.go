package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"daq.io/eventbuilder/operator/internal/testenv"
)

// The console as the manager serves it, against a real API server: no
// token gets 401, a token of someone not allowed 403, and the pages once
// the console-viewer rule is bound to them.
func TestConsoleIsForThoseTheAPIServerAllows(t *testing.T) {
	env := testenv.StartForTest(t, filepath.Join("..", ".."))
	ctrl.SetLogger(logr.Discard())
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := listener.Addr().String()
	_ = listener.Close()
	if err := addConsole(mgr, addr, "", nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	// The console's certificate is its own, self-signed: the test trusts it.
	httpClient := &http.Client{Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec
	get := func(token string) (int, error) {
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/console/", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	expect := func(what, token string, want int) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, what, func() error {
			code, err := get(token)
			if err != nil {
				return err
			}
			if code != want {
				return fmt.Errorf("status %d, want %d", code, want)
			}
			return nil
		})
	}
	expect("no token: 401", "", http.StatusUnauthorized)

	clientset, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	// A crew member, bound to the viewer rule, and a visitor, not: two
	// accounts, as the console caches each answer of the API server.
	viewer := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "console-viewer"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/console", "/console/*"}, Verbs: []string{"get"}}}}
	if _, err := clientset.RbacV1().ClusterRoles().Create(ctx, viewer, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "crew-views-console"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "console-viewer"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "crew", Namespace: "default"}}}
	if _, err := clientset.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tokenOf := func(name string) string {
		t.Helper()
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
		if _, err := clientset.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		token, err := clientset.CoreV1().ServiceAccounts("default").CreateToken(ctx, name,
			&authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return token.Status.Token
	}
	expect("a visitor's token: 403", tokenOf("visitor"), http.StatusForbidden)
	expect("a crew member's token: 200", tokenOf("crew"), http.StatusOK)
}
