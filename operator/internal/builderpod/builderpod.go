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
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
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
	// whose hash differs from what the run now renders (its image,
	// resources, placement...; never the rank table) is replaced.
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
		ObjectMeta: ownedBy(run, ServiceName(run.Name)),
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

// ownedBy is the metadata of a run's object named name: in the run's
// namespace, labelled as the run's, owned by it.
func ownedBy(run *ebv1.EventBuilderRun, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: run.Namespace, Labels: Selector(run.Name), OwnerReferences: OwnerRefs(run)}
}

// DisruptionBudgetName is the PodDisruptionBudget of a run on a fabric.
func DisruptionBudgetName(run string) string { return ServiceName(run) }

// DisruptionBudget renders the PodDisruptionBudget of a run on a fabric
// whose rank table has ranks ranks: no builder pod may be evicted. A drain
// therefore waits while the operator moves the units off the cordoned node
// to spares and deletes their old pods itself (runplan.Draining); a unit
// with no spare holds the drain rather than be lost silently. Runs without
// a fabric have none: their units rejoin wherever the scheduler puts them.
//
// minAvailable is every rank (no run has more pods than ranks), a count:
// the disruption controller takes it as it is, where maxUnavailable (or a
// percentage) would make it ask the run's scale for the pods expected,
// which counts units, not their spares' pods.
func DisruptionBudget(run *ebv1.EventBuilderRun, ranks int32) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: ownedBy(run, DisruptionBudgetName(run.Name)),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(ranks)),
			Selector:     &metav1.LabelSelector{MatchLabels: Selector(run.Name)},
		},
	}
}

// Args is the eb-builder command line of a rank: a builder in controlled
// mode. It starts NOT_READY and gets its rank table from the operator's
// configure call (builder/docs/control-api.md), so nothing here depends on
// the table: a new epoch never changes a pod. Its placement (NUMA node,
// NIC) it finds in the environment. A verbs builder is told its transport
// and, on a fabric, the device to open: the endpoint's rdmaDevice (as in
// EB_RDMA_DEVICE; the flag also pins it to that device's NUMA node, the
// endpoint's); without one the builder chooses.
func Args(run *ebv1.EventBuilderRun, rank int32, place *Placement) []string {
	b := run.Spec.Builder
	// The API server defaults the source; nil only in hand-made objects.
	var fragmentSize int32
	if b.Source != nil && b.Source.Generator != nil {
		fragmentSize = b.Source.Generator.FragmentSize
	}
	args := []string{
		"--rank", strconv.Itoa(int(rank)),
		"--http-port", strconv.Itoa(HTTPPort),
		"--token-file", ControlTokenPath,
		"--data-key-file", DataKeyPath,
		"--packing-factor", strconv.Itoa(int(b.PackingFactor)),
	}
	// A readout driver's or a file's fragments are theirs to size.
	if shmSource(b) == nil && fileSource(b) == nil {
		args = append(args, "--fragment-size", strconv.Itoa(int(fragmentSize)))
	}
	args = append(args, dataflowArgs(b, rank)...)
	// The builder's defaults go unsaid (tcp, check, drop, its timeouts):
	// pods keep the command line (and spec hash) they always had.
	if b.Transport == ebv1.TransportVerbs {
		args = append(args, "--transport", string(ebv1.TransportVerbs))
		if place != nil && place.RDMADevice != "" {
			args = append(args, "--rdma-device", place.RDMADevice)
		}
	}
	if b.Output != nil && b.Output.Discard != nil {
		args = append(args, "--output", "discard")
	}
	if b.IncompleteEvents == ebv1.IncompleteFlag {
		args = append(args, "--incomplete", "flag")
	}
	return append(args, TunedArgs(b)...)
}

// TunedArgs are the run's builder settings tagged ebflag that it sets, each
// as its flag: a duration in the flag's unit (-ms or -us), a count as it
// is, in the fields' order, so a pod's command line stays what it was.
// Unset, the builder's default holds (its timeouts, busy polling, the data
// threads it counts from its container's CPUs, one TCP stream).
func TunedArgs(b ebv1.BuilderSpec) []string {
	var args []string
	spec := reflect.ValueOf(b)
	for i := range spec.NumField() {
		flag := spec.Type().Field(i).Tag.Get("ebflag")
		if flag == "" {
			continue
		}
		switch value := spec.Field(i).Interface().(type) {
		case *metav1.Duration:
			if value != nil {
				args = append(args, flag, strconv.FormatInt(int64(value.Duration/FlagUnit(flag)), 10))
			}
		case *int32:
			if value != nil {
				args = append(args, flag, strconv.Itoa(int(*value)))
			}
		default:
			panic(fmt.Sprintf("BuilderSpec.%s: ebflag %s on a %T, which TunedArgs cannot pass", spec.Type().Field(i).Name, flag, value))
		}
	}
	return args
}

// FlagUnit is the unit of a duration flag: microseconds for -us, else milliseconds (-ms).
func FlagUnit(flag string) time.Duration {
	if strings.HasSuffix(flag, "-us") {
		return time.Microsecond
	}
	return time.Millisecond
}

// onNode is the affinity that lets a pod run on the named node only (by
// metadata.name, which the node's hostname label need not match); nil for
// no node.
func onNode(node string) *corev1.Affinity {
	if node == "" {
		return nil
	}
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
				Key: nodeNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node},
			}}}},
		},
	}}
}

const nodeNameField = "metadata.name"

// Node is the node a pod is placed on by its affinity (onNode); for a pod
// made before placement went through the scheduler, the node it was bound
// to (spec.nodeName), so that an operator upgrade does not take every pod
// for misplaced; "" for a pod the scheduler may put anywhere.
func Node(pod *corev1.Pod) string {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return pod.Spec.NodeName
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == nodeNameField && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// SpecHash hashes what a builder pod runs: its node, Multus networks, the
// control Secret it was started with, and containers (image, pull policy,
// command, args, env, resources, probes, security; a readout driver's
// init container too, left out when there is none so that other pods
// keep their hash), volumes, tolerations (a pod Pending on a taint gets
// the toleration added to the run) and DRA claims. A pod
// whose hash differs from the run's current rendering is replaced; the
// rank table is not part of it (it comes by configure).
func SpecHash(pod *corev1.Pod) string {
	b, _ := json.Marshal(struct { // plain API types: cannot fail
		Node          string
		Networks      string
		ControlSecret string
		Security      *corev1.PodSecurityContext
		Containers    []corev1.Container
		Volumes       []corev1.Volume
		Init          []corev1.Container        `json:",omitempty"`
		Tolerations   []corev1.Toleration       `json:",omitempty"`
		Claims        []corev1.PodResourceClaim `json:",omitempty"`
	}{Node(pod), pod.Annotations[NetworksAnnotation], pod.Annotations[ControlSecretAnnotation],
		pod.Spec.SecurityContext, pod.Spec.Containers, pod.Spec.Volumes, pod.Spec.InitContainers, pod.Spec.Tolerations,
		pod.Spec.ResourceClaims})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// The control token: a Secret per run, mounted read-only in every builder
// pod, whose file eb-builder reads at start (--token-file) and whose value
// the operator sends as its bearer token.
const (
	ControlTokenKey    = "token"
	ControlTokenDir    = "/var/run/eventbuilder/control"
	ControlTokenPath   = ControlTokenDir + "/" + ControlTokenKey
	controlTokenVolume = "control-token"
	// ControlSecretAnnotation on a pod holds the UID of the control
	// Secret it was created with: a Secret deleted and created anew holds
	// a new token, which running builders never read, so their pods are
	// replaced.
	ControlSecretAnnotation = "eventbuilder.daq.io/control-secret-uid"
	// ControlTokenBytes is how many random bytes a token has.
	ControlTokenBytes = 32
	// The run's data key, in the same Secret: every builder proves it on
	// each data connection (an HMAC over the peer's nonce and its hello,
	// --data-key-file), so no other process can take a rank of the run.
	DataKeyKey   = "data-key"
	DataKeyPath  = ControlTokenDir + "/" + DataKeyKey
	DataKeyBytes = 32
)

// ControlSecretName is the Secret holding a run's control token.
func ControlSecretName(run string) string { return run + "-control" }

// ControlSecret renders the control Secret of a run holding its control
// token and its data key. It is immutable: a new token is a new Secret (and
// new pods).
func ControlSecret(run *ebv1.EventBuilderRun, token, dataKey string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:            ControlSecretName(run.Name),
			Namespace:       run.Namespace,
			Labels:          Selector(run.Name),
			OwnerReferences: OwnerRefs(run),
		},
		Type:      corev1.SecretTypeOpaque,
		Immutable: ptr.To(true),
		Data:      map[string][]byte{ControlTokenKey: []byte(token), DataKeyKey: []byte(dataKey)},
	}
}

// Placement is where a unit of a run on a Fabric runs: its endpoint.
type Placement struct {
	Endpoint   string
	Node       string
	NUMA       int
	RDMADevice string
	Netdev     string
	// Streams are the readout streams the endpoint reads (its cards'
	// fibres): a readout driver asks for that many of the readout resource,
	// or in claims mode for these.
	Streams []string
	// WithoutFibres: the Fabric lists readout streams, but none on this
	// endpoint (a farm's spare server, cabled to the network only). A
	// folded unit here runs its BU alone, so its pod has no readout driver
	// and asks for no card: the server may have none.
	WithoutFibres bool
}

// Environment variables the builder finds its placement in.
const (
	EnvRankTable  = "EB_RANK_TABLE"
	EnvNUMANode   = "EB_NUMA_NODE"
	EnvRDMADevice = "EB_RDMA_DEVICE"
	EnvNetdev     = "EB_NETDEV"
	EnvEndpoint   = "EB_ENDPOINT"
	// The run's identity, for the builder's logs and what runs beside it.
	EnvRunNumber = "EB_RUN_NUMBER"
	EnvPartition = "EB_PARTITION"
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

// Network is the NetworkAttachmentDefinition that network names for NUMA
// node numa: "namespace/name", or "name" in the pod's namespace ("").
func Network(network string, numa int) (namespace, name string) {
	name = numaName(network, numa)
	if ns, n, ok := strings.Cut(name, "/"); ok {
		return ns, n
	}
	return "", name
}

// networks renders the Multus annotation attaching network as eb0.
func networks(network string, numa int) string {
	type attachment struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace,omitempty"`
		Interface string `json:"interface"`
	}
	a := attachment{Interface: NetworkInterface}
	a.Namespace, a.Name = Network(network, numa)
	b, _ := json.Marshal([]attachment{a}) // plain strings: cannot fail
	return string(b)
}

// securityContext is the builder container's: a read-only root
// filesystem, no privilege escalation, every capability dropped but what
// the transport needs. RDMA registers (pins) the builder's buffers, which
// RLIMIT_MEMLOCK bounds unless the process holds CAP_IPC_LOCK. Kubernetes
// gives a non-root process no ambient capabilities (and no_new_privs
// blocks file capabilities), so an added IPC_LOCK is effective for root
// only: a verbs builder runs as root with IPC_LOCK its one capability
// (the README says why not the runtime's memlock limit). TCP builders run
// as uid 65532, with nothing to pin; with rdma they keep the IPC_LOCK
// they always had (inert: in the bounding set only), so their pods stay
// as they were and are not replaced.
func securityContext(transport ebv1.Transport, rdma bool) *corev1.SecurityContext {
	sc := &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To[int64](nonRootUID),
		ReadOnlyRootFilesystem:   ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	switch {
	case transport == ebv1.TransportVerbs:
		sc.RunAsNonRoot, sc.RunAsUser = ptr.To(false), ptr.To[int64](0)
		sc.Capabilities.Add = []corev1.Capability{"IPC_LOCK"}
	case rdma:
		sc.Capabilities.Add = []corev1.Capability{"IPC_LOCK"}
	}
	return sc
}

// Pod renders the pod of one rank: a live rank, or a warm spare (which
// runs the same builder, standing by as a dummy until a configure makes
// its rank live). place is nil for runs without a fabric: the scheduler
// puts those pods anywhere. On a fabric the rank is tied to the endpoint's
// switch port, so the pod may run on the endpoint's node only: a required
// node affinity on that node's name, not spec.nodeName, so that the
// scheduler still binds it and honours cordons, taints and drains (an
// evicted pod stays Pending on a cordoned node instead of coming back), and
// the kubelet's admission still checks resources and NUMA alignment. secretUID is the
// UID of the run's control Secret, whose token the pod mounts.
func Pod(run *ebv1.EventBuilderRun, rank int32, place *Placement, secretUID string) *corev1.Pod {
	labels := Selector(run.Name)
	labels[LabelRank] = strconv.Itoa(int(rank))
	name := PodName(run.Name, rank)
	res := run.Spec.Resources

	numa := 0
	env := []corev1.EnvVar{{Name: EnvRankTable, Value: ranktable.MountPath}}
	if n := run.Spec.RunNumber; n != nil {
		env = append(env, corev1.EnvVar{Name: EnvRunNumber, Value: strconv.FormatInt(*n, 10)})
	}
	if p := run.Spec.Partition; p != "" {
		env = append(env, corev1.EnvVar{Name: EnvPartition, Value: p})
	}
	annotations := map[string]string{ControlSecretAnnotation: secretUID}
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
	mounts := []corev1.VolumeMount{
		// The root filesystem is read-only; give the builder a scratch dir.
		{Name: "tmp", MountPath: "/tmp"},
		// A directory mount, not subPath: the kubelet then refreshes the
		// file when a failover publishes a new epoch.
		{Name: "ranks", MountPath: ranktable.MountDir, ReadOnly: true},
		// The control token and the data key, read once at start
		// (--token-file, --data-key-file).
		{Name: controlTokenVolume, MountPath: ControlTokenDir, ReadOnly: true},
	}
	volumes := []corev1.Volume{
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "ranks", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ranktable.ConfigMapName(run.Name)},
			Items:                []corev1.KeyToPath{{Key: ranktable.Key, Path: ranktable.Key}},
		}}},
		// Readable by the builder's group only (fsGroup below).
		{Name: controlTokenVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  ControlSecretName(run.Name),
			Items:       []corev1.KeyToPath{{Key: ControlTokenKey, Path: ControlTokenKey}, {Key: DataKeyKey, Path: DataKeyKey}},
			DefaultMode: ptr.To[int32](0o440),
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
			Affinity:    onNode(nodeName),
			Tolerations: run.Spec.Tolerations,
			// hostname.subdomain is the name peers dial.
			Hostname:      name,
			Subdomain:     ServiceName(run.Name),
			RestartPolicy: corev1.RestartPolicyAlways,
			// The builder never talks to the API server, and a namespace
			// full of services must not bloat its environment.
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			// Volumes (the control token) belong to the builder's group.
			SecurityContext: &corev1.PodSecurityContext{FSGroup: ptr.To[int64](nonRootUID)},
			Containers: []corev1.Container{{
				Name:            ContainerName,
				Image:           run.Spec.Builder.Image,
				ImagePullPolicy: run.Spec.Builder.ImagePullPolicy,
				Command:         []string{"eb-builder"},
				Args:            Args(run, rank, place),
				Env:             env,
				Ports: []corev1.ContainerPort{
					{Name: DataPortName, ContainerPort: DataPort, Protocol: corev1.ProtocolTCP},
					{Name: HTTPPortName, ContainerPort: HTTPPort, Protocol: corev1.ProtocolTCP},
				},
				Resources: Resources(builderResources(run), numa),
				// Ready once configured (READY, RUNNING, PAUSED); the
				// Service publishes not-ready addresses, so peers find
				// each other before.
				ReadinessProbe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{
						HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString(HTTPPortName)},
					},
					PeriodSeconds: 2,
				},
				// Alive while it serves, ERROR included (a restart would
				// lose the error).
				LivenessProbe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{
						HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString(HTTPPortName)},
					},
					PeriodSeconds:    10,
					TimeoutSeconds:   3,
					FailureThreshold: 3,
				},
				SecurityContext: securityContext(run.Spec.Builder.Transport, res.RDMA != ""),
				VolumeMounts:    mounts,
			}},
			Volumes: volumes,
		},
	}
	addDataflow(pod, run, rank, place, env, pod.Spec.Containers[0].SecurityContext)
	claimDevices(pod, ClaimTemplate(run, place))
	annotations[SpecHashAnnotation] = SpecHash(pod)
	return pod
}
