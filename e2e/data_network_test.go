package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1alpha1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// dataPodRange is where the data network's definition gives pods addresses
// (whereabouts); the nodes have 10.200.0.0/24 on data0 (cluster/up.sh).
var dataPodRange = netip.MustParsePrefix("10.200.64.0/18")

// A run with spec.resources.network builds over the data network. The
// chart renders its NetworkAttachmentDefinition (macvlan on each node's
// data0, a second Docker network, with whereabouts addresses); the kind
// cluster's NPWG emulation (cluster/npwg) attaches it to each builder pod as
// eb0 and writes the network-status annotation, from which the operator
// gives peers their data addresses. Each builder's transport counts what it
// sent and received; the pod's interface counters show those bytes on eb0
// and not on eth0, the pod network.
func TestDataPlaneCrossesTheDataNetwork(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const namespaceName, network = "e2e-datanet", "eb-numa0"
	ensureNamespace(ctx, t, namespaceName)
	applyDataNetwork(ctx, t, namespaceName)

	key := client.ObjectKey{Namespace: namespaceName, Name: "datanet"}
	run := runningRun(ctx, t, key, 4, func(spec *ebv1alpha1.EventBuilderRunSpec) { spec.Resources.Network = network })
	waitFor(ctx, t, "NetworksFound True", time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, key, run); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(run.Status.Conditions, ebv1alpha1.ConditionNetworksFound)
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("%s NetworksFound %+v", describe(run), c)
	})

	var pods []string
	for _, rk := range run.Status.Ranks {
		if rk.Role != ebv1alpha1.RoleLive {
			continue
		}
		pod := builderPod(ctx, t, namespaceName, rk.Pod)
		address := dataAddress(t, pod)
		if !dataPodRange.Contains(address) {
			t.Errorf("pod %s: data address %s, want one in the definition's range %s", pod.Name, address, dataPodRange)
		}
		t.Logf("rank %d: pod %s on %s, eb0 %s (pod network %s)", rk.Rank, pod.Name, pod.Spec.NodeName, address, pod.Status.PodIP)
		pods = append(pods, pod.Name)
	}
	if len(pods) != 4 {
		t.Fatalf("%d live ranks with pods, want 4: %s", len(pods), describe(run))
	}

	// Each unit sends to three peers; wait until each has sent 256 MiB, so
	// that the pod network's own traffic (control calls, probes) is small
	// beside it.
	const enough = 256 << 20
	for _, pod := range pods {
		var c interfaceCounters
		waitFor(ctx, t, "pod "+pod+" sent 256 MiB", 3*time.Minute, func() (bool, string) {
			c = readInterfaceCounters(ctx, t, namespaceName, pod)
			return c.sent >= enough, fmt.Sprintf("%+v", c)
		})
		t.Logf("pod %s: transport sent %d received %d; eb0 tx %d rx %d; eth0 tx %d rx %d", pod, c.sent, c.received,
			c.dataTx, c.dataRx, c.podTx, c.podRx)
		// The transport's counters were read before the interfaces': every
		// byte counted there has crossed eb0 (with its headers) by then.
		if c.dataTx < c.sent || c.dataRx < c.received {
			t.Errorf("pod %s: eb0 moved tx %d rx %d bytes, fewer than the transport's %d sent and %d received: the data went elsewhere",
				pod, c.dataTx, c.dataRx, c.sent, c.received)
		}
		if c.podTx > c.sent/20 || c.podRx > c.received/20 {
			t.Errorf("pod %s: eth0 (the pod network) moved tx %d rx %d bytes, more than 5%% of the transport's %d sent and %d received",
				pod, c.podTx, c.podRx, c.sent, c.received)
		}
	}
	deleteRun(ctx, t, key)
}

// dataAddress is the pod's eb0 address in its network-status annotation.
func dataAddress(t *testing.T, pod *corev1.Pod) netip.Addr {
	t.Helper()
	raw := pod.Annotations["k8s.v1.cni.cncf.io/network-status"]
	var statuses []struct {
		Interface string   `json:"interface"`
		IPs       []string `json:"ips"`
	}
	if err := json.Unmarshal([]byte(raw), &statuses); err != nil {
		t.Fatalf("pod %s: network-status %q: %v", pod.Name, raw, err)
	}
	for _, s := range statuses {
		if s.Interface == "eb0" && len(s.IPs) > 0 {
			if a, err := netip.ParseAddr(s.IPs[0]); err == nil {
				return a
			}
		}
	}
	t.Fatalf("pod %s: network-status %s has no eb0 address", pod.Name, raw)
	return netip.Addr{}
}

// applyDataNetwork renders the chart's data network for the namespace (one
// definition, NUMA node 0: macvlan on data0, whereabouts addresses in
// dataPodRange) and applies it.
func applyDataNetwork(ctx context.Context, t *testing.T, namespace string) {
	t.Helper()
	config := fmt.Sprintf(`[{"numa": 0, "config": {"cniVersion": "0.4.0", "type": "macvlan", "master": "data0", "mode": "bridge",
		"ipam": {"type": "whereabouts", "range": "10.200.0.0/16", "range_start": "%s", "range_end": "%s"}}}]`,
		dataPodRange.Addr().Next(), lastAddress(dataPodRange).Prev())
	rendered, err := exec.CommandContext(ctx, env.helm, "template", operatorRelease, "../charts/eventbuilder-operator",
		"--set", "dataNetwork.enabled=true", "--set-json", `dataNetwork.namespaces=["`+namespace+`"]`,
		"--set-json", "dataNetwork.numaNodes="+config, "--show-only", "templates/data-network.yaml").Output()
	if err != nil {
		t.Fatalf("helm template the data network: %v", err)
	}
	apply := exec.CommandContext(ctx, env.kubectl, "--kubeconfig", env.kubeconfig, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(string(rendered))
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply the data network: %v: %s\n%s", err, out, rendered)
	}
}

func lastAddress(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	bits := 32 - p.Bits()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]) | (1<<bits - 1)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// getMetrics is a bash line that asks the builder in the pod for its
// /metrics (the image has no HTTP client): the answer is on fd 3.
const getMetrics = `exec 3<>/dev/tcp/127.0.0.1/8080 && printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3`

// interfaceCounters: the builder's transport counters (its /metrics) and
// the pod's interfaces' byte counters, read in that order.
type interfaceCounters struct {
	sent, received, dataTx, dataRx, podTx, podRx uint64
}

func readInterfaceCounters(ctx context.Context, t *testing.T, namespace, pod string) interfaceCounters {
	t.Helper()
	const script = getMetrics + ` &&
grep -E '^eb_network_(sent|received)_bytes_total ' <&3 &&
for f in eb0/statistics/tx_bytes eb0/statistics/rx_bytes eth0/statistics/tx_bytes eth0/statistics/rx_bytes; do
  echo "$f $(cat /sys/class/net/$f)"; done`
	out := podExec(ctx, t, namespace, pod, "builder", "bash", "-c", script)
	values := map[string]uint64{}
	for _, line := range strings.Split(out, "\n") {
		name, value, _ := strings.Cut(strings.TrimSpace(line), " ")
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("pod %s: line %q of\n%s", pod, line, out)
		}
		values[name] = uint64(v)
	}
	return interfaceCounters{
		sent: values["eb_network_sent_bytes_total"], received: values["eb_network_received_bytes_total"],
		dataTx: values["eb0/statistics/tx_bytes"], dataRx: values["eb0/statistics/rx_bytes"],
		podTx: values["eth0/statistics/tx_bytes"], podRx: values["eth0/statistics/rx_bytes"],
	}
}
