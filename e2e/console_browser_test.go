package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1alpha1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// The shift crew's console (the chart's console.enabled, which the suite
// installs) seen the way the crew sees it: in a real browser, Debian's
// chromium, headless, driven over the DevTools protocol (chromedp), through
// kubectl port-forward to the operator, with the bearer token of a service
// account bound to the chart's console-viewer ClusterRole. Each page read
// is also saved as a PNG under E2E_ARTIFACTS (default build/e2e).

// requireAllTests is set by make test: a test that cannot run fails.
const requireAllTests = "EB_REQUIRE_ALL_TESTS"

// unavailable skips t for want of reason, or fails it under make test.
func unavailable(t *testing.T, reason string) {
	t.Helper()
	if os.Getenv(requireAllTests) != "" {
		t.Fatalf("%s; %s is set (make test): every test must run", reason, requireAllTests)
	}
	t.Skip(reason)
}

// consolePort is the chart's console.port, which the suite leaves as is.
const consolePort = 8444

// console is the operator's console as a browser reaches it.
type console struct {
	base   string // https://127.0.0.1:PORT/console/
	token  string
	chrome context.Context // a browser tab
}

// openConsole forwards a local port to the operator's console, gets a
// token allowed to read it, and starts chromium; all undone at t's end.
func openConsole(ctx context.Context, t *testing.T, namespace string) *console {
	t.Helper()
	chromium := os.Getenv("E2E_CHROMIUM")
	if chromium == "" {
		chromium, _ = exec.LookPath("chromium")
	}
	if chromium == "" {
		unavailable(t, "no chromium (Debian package chromium, or E2E_CHROMIUM) to open the console in")
	}
	deployment := operatorDeployment(ctx, t)
	c := &console{base: fmt.Sprintf("https://127.0.0.1:%s/console/", forwardPort(ctx, t, deployment, consolePort)),
		token: consoleToken(ctx, t, namespace, deployment+"-console-viewer")}

	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath(chromium),
		chromedp.IgnoreCertErrors, // the manager's own self-signed certificate, as for its metrics
		chromedp.WindowSize(1280, 1024))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // chromium refuses to run as root with its sandbox
	}
	// The browser lives as long as the context of its first Run, so that
	// one is the test's own (its deadline bounds the start too); each page
	// read has its own timeout, derived from it.
	allocator, stopAllocator := chromedp.NewExecAllocator(ctx, opts...)
	chrome, stopChrome := chromedp.NewContext(allocator)
	t.Cleanup(func() { stopChrome(); stopAllocator() })
	if err := chromedp.Run(chrome, network.Enable(),
		network.SetExtraHTTPHeaders(network.Headers{"Authorization": "Bearer " + c.token})); err != nil {
		t.Fatalf("start chromium (%s): %v", chromium, err)
	}
	c.chrome = chrome
	return c
}

// operatorDeployment is the name of the chart's Deployment, the one with a
// console port.
func operatorDeployment(ctx context.Context, t *testing.T) string {
	t.Helper()
	list, err := clientset.AppsV1().Deployments(operatorNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list deployments in %s: %v", operatorNamespace, err)
	}
	for _, d := range list.Items {
		for _, container := range d.Spec.Template.Spec.Containers {
			if slices.ContainsFunc(container.Ports, func(p corev1.ContainerPort) bool { return p.Name == "console" }) {
				return d.Name
			}
		}
	}
	t.Fatalf("no Deployment in %s serves a console port: the suite installs the chart with console.enabled=true", operatorNamespace)
	return ""
}

var forwarding = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> `)

// forwardPort runs kubectl port-forward to port of the deployment's pod and
// returns the local port it chose.
func forwardPort(ctx context.Context, t *testing.T, deployment string, port int) string {
	t.Helper()
	cmd := exec.Command(env.kubectl, "--kubeconfig", env.kubeconfig, "-n", operatorNamespace, "port-forward",
		"--address", "127.0.0.1", "deploy/"+deployment, fmt.Sprintf(":%d", port))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("kubectl port-forward: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			if m := forwarding.FindStringSubmatch(lines.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, out) // kubectl logs each connection
	}()
	select {
	case local := <-found:
		return local
	case <-time.After(time.Minute):
		t.Fatalf("kubectl port-forward deploy/%s %d: no forwarding within a minute", deployment, port)
	case <-ctx.Done():
		t.Fatalf("kubectl port-forward deploy/%s %d: %v", deployment, port, ctx.Err())
	}
	return ""
}

// consoleToken is a short-lived token of a service account in namespace
// bound to role (the chart's console-viewer ClusterRole).
func consoleToken(ctx context.Context, t *testing.T, namespace, role string) string {
	t.Helper()
	const account = "shift-crew"
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: account, Namespace: namespace}}
	if err := k8sClient.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create service account %s/%s: %v", namespace, account, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: namespace + "-" + account},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: account, Namespace: namespace}},
	}
	if err := k8sClient.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("bind %s to %s/%s: %v", role, namespace, account, err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), binding) })
	token, err := clientset.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, account,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(1800))}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", namespace, account, err)
	}
	return token.Status.Token
}

// refusesAnonymous checks that the console answers a request without a
// token 401.
func (c *console) refusesAnonymous(ctx context.Context, t *testing.T) {
	t.Helper()
	insecure := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the manager's self-signed certificate
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.base, nil)
	resp, err := insecure.Do(req)
	if err != nil {
		t.Fatalf("GET %s without a token: %v", c.base, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET %s without a token: %s, want 401 Unauthorized", c.base, resp.Status)
	}
}

// endpointBox is one endpoint as the page's fabric map draws it.
type endpointBox struct {
	ID    string `json:"id"`
	Class string `json:"class"`
	Label string `json:"label"`
}

// runPage is what the browser shows of a run's page.
type runPage struct {
	Heading, Ranks, Failovers string
	RateSource                string // where the rate chart's points come from
	RatePoints                int    // how many it draws
	Endpoints                 []endpointBox
	Screenshot                string // the PNG it was saved to
}

// readRunPage opens the run's page, reads it from the DOM, and saves a
// screenshot named name. A page that is not the run's (an error the
// console answered, a failed port-forward) is an error naming what the
// browser shows, for the wait around it to retry and report.
func (c *console) readRunPage(run *ebv1alpha1.EventBuilderRun, name string) (runPage, error) {
	tab, cancel := context.WithTimeout(c.chrome, 30*time.Second)
	defer cancel()
	var page runPage
	var png []byte
	var isRunPage bool
	var shown string
	url := c.base + "runs/" + run.Namespace + "/" + run.Name
	if err := chromedp.Run(tab, chromedp.Navigate(url), chromedp.WaitReady("body", chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector("#ranks") !== null`, &isRunPage),
		chromedp.Text("body", &shown, chromedp.ByQuery)); err != nil {
		return page, fmt.Errorf("chromium at %s: %w", url, err)
	}
	if !isRunPage {
		return page, fmt.Errorf("chromium at %s shows no run page: %.300s", url, shown)
	}
	err := chromedp.Run(tab,
		chromedp.Text("#run", &page.Heading, chromedp.ByQuery), chromedp.Text("#ranks", &page.Ranks, chromedp.ByQuery),
		chromedp.Text("#failovers", &page.Failovers, chromedp.ByQuery),
		chromedp.Text("#rate-source", &page.RateSource, chromedp.ByQuery),
		chromedp.Evaluate(`(document.querySelector("#rate polyline")?.getAttribute("points") || "").split(" ").filter(p => p).length`,
			&page.RatePoints),
		chromedp.Evaluate(`Array.from(document.querySelectorAll("svg.fabric g.endpoint")).map(g => ({
			id: g.id, class: g.getAttribute("class"), label: g.querySelector("text").textContent}))`, &page.Endpoints),
		chromedp.FullScreenshot(&png, 100))
	if err != nil {
		return page, fmt.Errorf("chromium at %s: %w", url, err)
	}
	dir := os.Getenv("E2E_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "build", "e2e")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return page, err
	}
	page.Screenshot, _ = filepath.Abs(filepath.Join(dir, name+".png"))
	return page, os.WriteFile(page.Screenshot, png, 0o644)
}

// expectedClass is the colour class the console gives endpoint for what
// the run's status says runs there (console.class): unschedulable (the
// Fabric's status says), live and RUNNING, spare, dummy; nothing, after a
// unit failed there in the last failover; or free.
func expectedClass(run *ebv1alpha1.EventBuilderRun, fabric *ebv1alpha1.Fabric, endpoint string) string {
	if slices.ContainsFunc(fabric.Status.Unschedulable, func(u ebv1alpha1.UnschedulableEndpoint) bool { return u.Name == endpoint }) {
		return "down"
	}
	i := slices.IndexFunc(run.Status.Ranks, func(rk ebv1alpha1.RankStatus) bool { return rk.Endpoint == endpoint })
	if i < 0 {
		if f := run.Status.LastFailover; f != nil &&
			slices.ContainsFunc(f.Moves, func(m ebv1alpha1.UnitMove) bool { return m.FailedEndpoint == endpoint }) {
			return "failed"
		}
		return "free"
	}
	switch rk := run.Status.Ranks[i]; {
	case rk.Role == ebv1alpha1.RoleSpare:
		return "spare"
	case rk.Role == ebv1alpha1.RoleDummy:
		return "dummy"
	case rk.State == "RUNNING":
		return "live"
	default:
		return "trouble"
	}
}

// pageMatches says how the page differs from the run's status and fabric:
// every endpoint drawn once, each coloured as its occupant's role and state
// say and labelled with its rank, every rank in the rank table. "" when it
// does not.
func pageMatches(page runPage, run *ebv1alpha1.EventBuilderRun, fabric *ebv1alpha1.Fabric) string {
	var diffs []string
	if !strings.Contains(page.Heading, string(run.Status.Phase)) {
		diffs = append(diffs, fmt.Sprintf("heading %q, status phase %s", page.Heading, run.Status.Phase))
	}
	for _, e := range fabric.Spec.Endpoints {
		var boxes []endpointBox
		for _, b := range page.Endpoints {
			if b.ID == "endpoint-"+e.Name {
				boxes = append(boxes, b)
			}
		}
		if len(boxes) != 1 {
			diffs = append(diffs, fmt.Sprintf("endpoint %s drawn %d times", e.Name, len(boxes)))
			continue
		}
		if want := "endpoint " + expectedClass(run, fabric, e.Name); boxes[0].Class != want {
			diffs = append(diffs, fmt.Sprintf("endpoint %s has class %q, want %q", e.Name, boxes[0].Class, want))
		}
	}
	if len(page.Endpoints) != len(fabric.Spec.Endpoints) {
		diffs = append(diffs, fmt.Sprintf("%d endpoints drawn, the fabric has %d", len(page.Endpoints), len(fabric.Spec.Endpoints)))
	}
	for _, rk := range run.Status.Ranks {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^\s*%d\s`, rk.Rank)).MatchString(page.Ranks) {
			diffs = append(diffs, fmt.Sprintf("rank %d not in the rank table", rk.Rank))
		}
		if rk.Endpoint == "" || rk.Role == ebv1alpha1.RoleDummy {
			continue
		}
		if i := slices.IndexFunc(page.Endpoints, func(b endpointBox) bool { return b.ID == "endpoint-"+rk.Endpoint }); i >= 0 &&
			!strings.HasSuffix(page.Endpoints[i].Label, fmt.Sprintf(" r%d", rk.Rank)) {
			diffs = append(diffs, fmt.Sprintf("endpoint %s labelled %q, not with rank %d", rk.Endpoint, page.Endpoints[i].Label, rk.Rank))
		}
	}
	return strings.Join(diffs, "; ")
}

// waitForPage reads the run's page until it shows what the run's status
// says (the console reads the operator's cache, a moment behind), and
// returns it.
func (c *console) waitForPage(ctx context.Context, t *testing.T, run *ebv1alpha1.EventBuilderRun, fabric *ebv1alpha1.Fabric,
	name string) runPage {
	t.Helper()
	var page runPage
	waitFor(ctx, t, "the console's page of "+run.Name+" to show its status", time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(run), run); err != nil {
			return false, err.Error()
		}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(fabric), fabric); err != nil {
			return false, err.Error()
		}
		var err error
		if page, err = c.readRunPage(run, name); err != nil {
			return false, err.Error()
		}
		diff := pageMatches(page, run, fabric)
		return diff == "", diff
	})
	t.Logf("console page of %s saved to %s; rank table:\n%s\nfailovers:\n%s", run.Name, page.Screenshot, page.Ranks, page.Failovers)
	return page
}

// pluginSays runs `kubectl eventbuilder COMMAND NAME` (the plugin make
// builds, E2E_PLUGIN) against the suite's cluster, logs what it printed and
// returns it.
func pluginSays(ctx context.Context, t *testing.T, command, namespace, name string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, env.plugin, command, name, "-n", namespace, "--kubeconfig", env.kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl eventbuilder %s %s: %v\n%s", command, name, err, out)
	}
	t.Logf("kubectl eventbuilder %s %s -n %s:\n%s", command, name, namespace, out)
	return string(out)
}

// prometheusURL is the suite's Prometheus (e2e/monitoring), which the
// console is given (console.prometheusURL) to draw the event rate from.
const prometheusURL = "http://prometheus-operated.monitoring:9090"

// waitForPrometheusRate reads the run's page until its rate chart is drawn
// from the suite's Prometheus, with points.
func (c *console) waitForPrometheusRate(ctx context.Context, t *testing.T, run *ebv1alpha1.EventBuilderRun, name string) {
	t.Helper()
	// Prometheus finds new pods through the PodMonitor, scrapes every 5 s,
	// and a rate over 1m needs two scrapes: a minute or two after a run starts.
	waitFor(ctx, t, "the console to draw the rate of "+run.Name+" from Prometheus", 3*time.Minute, func() (bool, string) {
		page, err := c.readRunPage(run, name)
		if err != nil {
			return false, err.Error()
		}
		return strings.HasPrefix(page.RateSource, "from Prometheus at "+prometheusURL) && page.RatePoints >= 1,
			fmt.Sprintf("%d points %s", page.RatePoints, page.RateSource)
	})
}
