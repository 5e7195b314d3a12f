package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"daq.io/eventbuilder/operator/internal/shortlist"
	"daq.io/eventbuilder/operator/internal/testenv"
)

// operatorNamespace is where the chart is installed.
const operatorNamespace = "eventbuilder-system"

// chartRelease is the chart rendered as `helm install eventbuilder-operator`
// would install it: the objects that give the manager its identity and
// rights, and the manager's command line and replica count.
type chartRelease struct {
	rbac     []*unstructured.Unstructured
	args     []string
	replicas int
	fullname string
}

// renderChart runs helm template on the chart with its default values.
func renderChart(helm, chart string) (*chartRelease, error) {
	out, err := exec.Command(helm, "template", "eventbuilder-operator", chart, "--namespace", operatorNamespace).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = fmt.Errorf("%w: %s", err, exit.Stderr)
		}
		return nil, fmt.Errorf("helm template %s: %w", chart, err)
	}
	r := &chartRelease{}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("helm template %s: %w", chart, err)
		}
		switch obj.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			r.rbac = append(r.rbac, obj)
		case "Deployment":
			var d appsv1.Deployment
			if err := runtimeConvert(obj, &d); err != nil {
				return nil, err
			}
			r.fullname = d.Name
			r.replicas = int(*d.Spec.Replicas)
			for _, c := range d.Spec.Template.Spec.Containers {
				if c.Name == "manager" {
					r.args = c.Args
				}
			}
		}
	}
	if r.args == nil || r.replicas == 0 {
		return nil, fmt.Errorf("helm template %s: no Deployment with a manager container", chart)
	}
	return r, nil
}

func runtimeConvert(obj *unstructured.Unstructured, into any) error {
	b, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	return utilyaml.Unmarshal(b, into)
}

// operatorReplica is one manager process, as one pod of the chart's
// Deployment runs it: the chart's arguments, the chart's service account
// (its token, its RBAC), its probe and metrics on ports of its own.
type operatorReplica struct {
	proc    *process
	metrics string
}

// operator is the chart's manager Deployment run as processes.
type operator struct {
	replicas []*operatorReplica
	scrape   string // a token allowed to read the metrics
}

// startOperator installs the chart's RBAC and starts its replicas.
func startOperator(ctx context.Context, c client.Client, cfg *rest.Config, dir, binary string, chart *chartRelease) (*operator, error) {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}); err != nil {
		return nil, err
	}
	for _, obj := range chart.rbac {
		if err := c.Create(ctx, obj); err != nil {
			return nil, fmt.Errorf("the chart's %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	// Whoever scrapes the manager gets the chart's metrics-reader role.
	scraper := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "farm-bench-scraper", Namespace: operatorNamespace}}
	if err := c.Create(ctx, scraper); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "farm-bench-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: chart.fullname + "-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: scraper.Name, Namespace: operatorNamespace}},
	}); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	token := func(sa string) (string, error) {
		tr, err := cs.CoreV1().ServiceAccounts(operatorNamespace).CreateToken(ctx, sa,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600))}}, metav1.CreateOptions{})
		if err != nil {
			return "", fmt.Errorf("token of service account %s: %w", sa, err)
		}
		return tr.Status.Token, nil
	}
	o := &operator{}
	if o.scrape, err = token(scraper.Name); err != nil {
		return nil, err
	}
	managerToken, err := token(chart.fullname)
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "operator.kubeconfig")
	if err := writeTokenKubeconfig(kubeconfig, cfg, managerToken); err != nil {
		return nil, err
	}
	for i := range chart.replicas {
		ports, err := testenv.PickFreePorts(2)
		if err != nil {
			o.stop()
			return nil, err
		}
		probe, metrics := strconv.Itoa(ports[0]), strconv.Itoa(ports[1])
		args := []string{"--leader-election-namespace=" + operatorNamespace}
		for _, a := range chart.args {
			switch {
			case strings.HasPrefix(a, "--health-probe-bind-address="):
				a = "--health-probe-bind-address=127.0.0.1:" + probe
			case strings.HasPrefix(a, "--metrics-bind-address="):
				a = "--metrics-bind-address=127.0.0.1:" + metrics
			}
			args = append(args, a)
		}
		name := fmt.Sprintf("operator-%d", i)
		p, err := startProcess(name, filepath.Join(dir, name+".log"),
			[]string{"KUBECONFIG=" + kubeconfig, "POD_NAMESPACE=" + operatorNamespace}, binary, args...)
		if err != nil {
			o.stop()
			return nil, err
		}
		o.replicas = append(o.replicas, &operatorReplica{proc: p, metrics: "https://127.0.0.1:" + metrics + "/metrics"})
	}
	return o, nil
}

func ptrTo[T any](v T) *T { return &v }

// writeTokenKubeconfig writes a kubeconfig that reaches cfg's API server
// with a bearer token, as a pod's service account does.
func writeTokenKubeconfig(path string, cfg *rest.Config, token string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["farm"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["farm"] = &clientcmdapi.Context{Cluster: "farm", AuthInfo: "sa"}
	kc.CurrentContext = "farm"
	return clientcmd.WriteToFile(*kc, path)
}

func (o *operator) check() error {
	var errs []error
	for _, r := range o.replicas {
		errs = append(errs, r.proc.check())
	}
	return errors.Join(errs...)
}

func (o *operator) stop() {
	for _, r := range o.replicas {
		r.proc.stop()
	}
}

// metrics reads a replica's metrics: the sum of each family's samples
// whose name is in want.
func (o *operator) metrics(ctx context.Context, r *operatorReplica, want ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.metrics, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+o.scrape)
	// The manager serves its metrics with a self-signed certificate.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", r.metrics, resp.Status)
	}
	return sumSamples(resp.Body, want...)
}

// sumSamples sums, per metric name, the non-negative samples of a
// Prometheus text exposition whose names are in want.
func sumSamples(r io.Reader, want ...string) (map[string]float64, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	sums := map[string]float64{}
	for _, name := range want {
		family := families[name]
		if family == nil {
			continue
		}
		for _, m := range family.GetMetric() {
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
			if v >= 0 { // -1: a gauge its source could not read
				sums[name] += v
			}
		}
	}
	return sums, nil
}

// errorLogs counts the replicas' error-level log lines and gives the first.
func (o *operator) errorLogs() (int, string, error) {
	n, first := 0, ""
	for _, r := range o.replicas {
		data, err := os.ReadFile(r.proc.log)
		if err != nil {
			return 0, "", err
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, `"level":"error"`) {
				if n++; first == "" {
					first = shortlist.Clip(line, 400)
				}
			}
		}
	}
	return n, first, nil
}

// leader is the replica that leads (leader_election_master_status 1).
func (o *operator) leader(ctx context.Context) (*operatorReplica, error) {
	var last error
	for _, r := range o.replicas {
		m, err := o.metrics(ctx, r, "leader_election_master_status")
		if err != nil {
			last = err
			continue
		}
		if m["leader_election_master_status"] == 1 {
			return r, nil
		}
	}
	if last == nil {
		last = errors.New("no replica reports leader_election_master_status 1")
	}
	return nil, last
}

// usage is a process's CPU time so far and resident memory, from /proc.
func usage(pid int) (cpu time.Duration, rss int64, err error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// Fields after the command name (which may hold spaces), from state on.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	cpu = time.Duration(utime+stime) * time.Second / ticks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			rss = kb << 10
		}
	}
	return cpu, rss, nil
}
