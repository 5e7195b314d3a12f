// Package builderpod renders the Kubernetes objects of an EventBuilderRun's
// builder units: one headless Service giving every unit a stable DNS name,
// and one Pod per rank. It is pure: no client calls, so the rendering is
// table-tested and later planners (fabric ranks, NUMA/RDMA placement) can
// feed it without touching the reconciler.
package builderpod

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/planner"
	"daq.io/eventbuilder/operator/internal/ranktable"
)

// Ports and names every builder pod exposes.
const (
	ContainerName = "builder"
	DataPort      = 7000
	HTTPPort      = 8080
	DataPortName  = "data"
	HTTPPortName  = "http"
)

// Labels on every builder pod; the Service selects on the first two.
const (
	LabelName = "app.kubernetes.io/name"
	LabelRun  = "eventbuilder.daq.io/run"
	LabelRank = "eventbuilder.daq.io/rank"
	// LabelEndpoint names the Fabric endpoint a pod runs on.
	LabelEndpoint = "eventbuilder.daq.io/endpoint"

	// SpecHashAnnotation holds SpecHash of the pod as rendered: a pod
	// whose hash differs from what the run now renders is replaced.
	SpecHashAnnotation = "eventbuilder.daq.io/spec-hash"

	// NetworksAnnotation is Multus's list of extra networks of a pod.
	NetworksAnnotation = "k8s.v1.cni.cncf.io/networks"
	// NetworkInterface is the name of the Multus interface in the pod.
	NetworkInterface = "eb0"

	AppName = "eventbuilder"
)

// nonRootUID is the unprivileged user (65532, "nonroot") the images run as.
const nonRootUID = 65532

// ServiceName is the headless Service of a run; pods are <pod>.<ServiceName>.
func ServiceName(run string) string { return run + "-eb" }

// PodName is the name, and hostname, of the pod of a rank.
func PodName(run string, rank int32) string {
	return ServiceName(run) + "-" + strconv.Itoa(int(rank))
}

// Peers lists the data endpoints of all ranks, in rank order. Names are
// relative to the pod's namespace, which the pod's DNS search path resolves.
// Dummy ranks get the name their pod would have: nothing answers there,
// and the list stays the same when a failover moves units between ranks.
func Peers(run string, ranks int32) []string {
	peers := make([]string, ranks)
	svc := ServiceName(run)
	port := strconv.Itoa(DataPort)
	for r := range ranks {
		peers[r] = net.JoinHostPort(PodName(run, r)+"."+svc, port)
	}
	return peers
}

// Selector selects all builder pods of a run.
func Selector(run string) map[string]string {
	return map[string]string{LabelName: AppName, LabelRun: run}
}

// Rank returns the rank label of a builder pod.
func Rank(pod *corev1.Pod) (int32, bool) {
	r, err := strconv.ParseInt(pod.Labels[LabelRank], 10, 32)
	return int32(r), err == nil && r >= 0
}

// StatusURL is the base URL of a builder pod's HTTP API.
func StatusURL(pod *corev1.Pod) string {
	return "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(HTTPPort))
}

// OwnerRefs makes the run the controller of an object of its own.
func OwnerRefs(run *ebv1.EventBuilderRun) []metav1.OwnerReference {
	return []metav1.OwnerReference{*metav1.NewControllerRef(run, ebv1.GroupVersion.WithKind("EventBuilderRun"))}
}

// Service renders the headless Service of a run. It publishes not-ready
// addresses because builders must find each other before any is ready.
func Service(run *ebv1.EventBuilderRun) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            ServiceName(run.Name),
			Namespace:       run.Namespace,
			Labels:          Selector(run.Name),
			OwnerReferences: OwnerRefs(run),
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 Selector(run.Name),
			Ports: []corev1.ServicePort{
				{Name: DataPortName, Port: DataPort, TargetPort: intstr.FromString(DataPortName), Protocol: corev1.ProtocolTCP},
				{Name: HTTPPortName, Port: HTTPPort, TargetPort: intstr.FromString(HTTPPortName), Protocol: corev1.ProtocolTCP},
			},
		},
	}
}

// Dummies lists the ranks of t that run no builder: dummies and spares.
// eb-builder keeps them in the schedule but expects no process there.
func Dummies(t planner.RankTable) []int32 {
	var out []int32
	for _, r := range t.Ranks {
		if r.Role != planner.Live {
			out = append(out, int32(r.Rank))
		}
	}
	return out
}

// Args is the eb-builder command line of a rank of a schedule of n ranks,
// of which dummies (dummy and spare ranks) run no builder. Everything else
// the builder needs (its NUMA node, NIC) it gets from the environment:
// today's eb-builder refuses flags it does not know, and does not read the
// mounted rank table yet, so the table reaches it as --peers and --dummies.
func Args(run *ebv1.EventBuilderRun, rank, n int32, dummies []int32) []string {
	b := run.Spec.Builder
	// The API server defaults the source; nil only in hand-made objects.
	var fragmentSize int32
	if b.Source != nil && b.Source.Generator != nil {
		fragmentSize = b.Source.Generator.FragmentSize
	}
	args := []string{
		"--rank", strconv.Itoa(int(rank)),
		"--peers", strings.Join(Peers(run.Name, n), ","),
		"--http-port", strconv.Itoa(HTTPPort),
		"--packing-factor", strconv.Itoa(int(b.PackingFactor)),
		"--fragment-size", strconv.Itoa(int(fragmentSize)),
	}
	if len(dummies) > 0 {
		d := make([]string, len(dummies))
		for i, r := range dummies {
			d[i] = strconv.Itoa(int(r))
		}
		args = append(args, "--dummies", strings.Join(d, ","))
	}
	return args
}

// SpecHash hashes what a builder pod runs: its node, Multus networks and
// containers (image, pull policy, command, args with --peers and
// --dummies, env, resources, security). A running builder cannot change
// its table (there is no control API yet), so a pod whose hash differs
// from the run's current rendering is replaced.
func SpecHash(pod *corev1.Pod) string {
	b, _ := json.Marshal(struct { // plain API types: cannot fail
		Node       string
		Networks   string
		Containers []corev1.Container
		Volumes    []corev1.Volume
	}{pod.Spec.NodeName, pod.Annotations[NetworksAnnotation], pod.Spec.Containers, pod.Spec.Volumes})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// Placement is where a unit of a run on a Fabric runs: its endpoint.
type Placement struct {
	Endpoint   string
	Node       string
	NUMA       int
	RDMADevice string
	Netdev     string
}

// Environment variables the builder finds its placement in.
const (
	EnvRankTable  = "EB_RANK_TABLE"
	EnvNUMANode   = "EB_NUMA_NODE"
	EnvRDMADevice = "EB_RDMA_DEVICE"
	EnvNetdev     = "EB_NETDEV"
	EnvEndpoint   = "EB_ENDPOINT"
)

// numaName fills the {numa} placeholder of a resource or network name.
func numaName(template string, numa int) string {
	return strings.ReplaceAll(template, "{numa}", strconv.Itoa(numa))
}

// Resources renders a unit's resources. With cpus and memory set, requests
// equal limits for everything: Guaranteed QoS with whole CPUs, which the
// static CPU manager pins and the Topology Manager aligns on one NUMA node
// with the NIC and readout cards.
func Resources(r ebv1.UnitResources, numa int) corev1.ResourceRequirements {
	list := corev1.ResourceList{}
	if r.CPUs > 0 {
		list[corev1.ResourceCPU] = *resource.NewQuantity(int64(r.CPUs), resource.DecimalSI)
	}
	if r.Memory != nil {
		list[corev1.ResourceMemory] = r.Memory.DeepCopy()
	}
	if h := r.Hugepages; h != nil {
		list[corev1.ResourceName(corev1.ResourceHugePagesPrefix+h.PageSize)] = h.Size.DeepCopy()
	}
	if r.RDMA != "" {
		list[corev1.ResourceName(numaName(r.RDMA, numa))] = *resource.NewQuantity(1, resource.DecimalSI)
	}
	if rd := r.Readout; rd != nil {
		list[corev1.ResourceName(numaName(rd.Resource, numa))] = *resource.NewQuantity(int64(max(rd.Count, 1)), resource.DecimalSI)
	}
	if len(list) == 0 {
		return corev1.ResourceRequirements{}
	}
	return corev1.ResourceRequirements{Requests: list, Limits: list.DeepCopy()}
}

// networks renders the Multus annotation attaching network as eb0.
func networks(network string, numa int) string {
	type attachment struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace,omitempty"`
		Interface string `json:"interface"`
	}
	a := attachment{Name: numaName(network, numa), Interface: NetworkInterface}
	if ns, name, ok := strings.Cut(a.Name, "/"); ok {
		a.Namespace, a.Name = ns, name
	}
	b, _ := json.Marshal([]attachment{a}) // plain strings: cannot fail
	return string(b)
}

// Pod renders the pod of one rank of a schedule of n ranks, dummies of
// which run no builder. place is nil
// for runs without a fabric: the scheduler puts those pods anywhere. On a
// fabric the operator places the pod itself (spec.nodeName): the rank is
// tied to the endpoint's switch port, so there is no choice to leave to
// the scheduler, and the kubelet's admission still checks resources and
// NUMA alignment.
func Pod(run *ebv1.EventBuilderRun, rank, n int32, dummies []int32, place *Placement) *corev1.Pod {
	labels := Selector(run.Name)
	labels[LabelRank] = strconv.Itoa(int(rank))
	name := PodName(run.Name, rank)
	res := run.Spec.Resources

	numa := 0
	env := []corev1.EnvVar{{Name: EnvRankTable, Value: ranktable.MountPath}}
	annotations := map[string]string{}
	var nodeName string
	if place != nil {
		numa, nodeName = place.NUMA, place.Node
		labels[LabelEndpoint] = place.Endpoint
		env = append(env,
			corev1.EnvVar{Name: EnvEndpoint, Value: place.Endpoint},
			corev1.EnvVar{Name: EnvNUMANode, Value: strconv.Itoa(place.NUMA)},
			corev1.EnvVar{Name: EnvRDMADevice, Value: place.RDMADevice},
			corev1.EnvVar{Name: EnvNetdev, Value: place.Netdev})
	}
	if res.Network != "" {
		annotations[NetworksAnnotation] = networks(res.Network, numa)
	}
	caps := &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
	if res.RDMA != "" {
		// RDMA memory registration pins buffers. IPC_LOCK lets a process
		// lock memory beyond RLIMIT_MEMLOCK, but the builder runs as uid
		// 65532 with no_new_privs: a non-root process gets no ambient
		// capabilities, so IPC_LOCK lands in its bounding set only and is
		// never effective. It is kept for images run as root; non-root
		// builders rely on the runtime's RLIMIT_MEMLOCK (see the README).
		caps.Add = []corev1.Capability{"IPC_LOCK"}
	}

	mounts := []corev1.VolumeMount{
		// The root filesystem is read-only; give the builder a scratch dir.
		{Name: "tmp", MountPath: "/tmp"},
		// A directory mount, not subPath: the kubelet then refreshes the
		// file when a failover publishes a new epoch.
		{Name: "ranks", MountPath: ranktable.MountDir, ReadOnly: true},
	}
	volumes := []corev1.Volume{
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "ranks", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ranktable.ConfigMapName(run.Name)},
			Items:                []corev1.KeyToPath{{Key: ranktable.Key, Path: ranktable.Key}},
		}}},
	}
	if h := res.Hugepages; h != nil {
		mounts = append(mounts, corev1.VolumeMount{Name: "hugepages", MountPath: "/dev/hugepages"})
		volumes = append(volumes, corev1.Volume{Name: "hugepages", VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMedium(string(corev1.StorageMediumHugePages) + "-" + h.PageSize)},
		}})
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       run.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: OwnerRefs(run),
		},
		Spec: corev1.PodSpec{
			NodeName: nodeName,
			// hostname.subdomain is the name peers dial.
			Hostname:      name,
			Subdomain:     ServiceName(run.Name),
			RestartPolicy: corev1.RestartPolicyAlways,
			// The builder never talks to the API server, and a namespace
			// full of services must not bloat its environment.
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			Containers: []corev1.Container{{
				Name:            ContainerName,
				Image:           run.Spec.Builder.Image,
				ImagePullPolicy: run.Spec.Builder.ImagePullPolicy,
				Command:         []string{"eb-builder"},
				Args:            Args(run, rank, n, dummies),
				Env:             env,
				Ports: []corev1.ContainerPort{
					{Name: DataPortName, ContainerPort: DataPort, Protocol: corev1.ProtocolTCP},
					{Name: HTTPPortName, ContainerPort: HTTPPort, Protocol: corev1.ProtocolTCP},
				},
				Resources: Resources(res, numa),
				ReadinessProbe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{
						HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString(HTTPPortName)},
					},
					PeriodSeconds: 2,
				},
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot:             ptr.To(true),
					RunAsUser:                ptr.To[int64](nonRootUID),
					ReadOnlyRootFilesystem:   ptr.To(true),
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             caps,
					SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
				VolumeMounts: mounts,
			}},
			Volumes: volumes,
		},
	}
	annotations[SpecHashAnnotation] = SpecHash(pod)
	return pod
}
