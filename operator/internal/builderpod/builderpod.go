// Package builderpod renders the Kubernetes objects of an EventBuilderRun's
// builder units: one headless Service giving every unit a stable DNS name,
// and one Pod per rank. It is pure: no client calls, so the rendering is
// table-tested and later planners (fabric ranks, NUMA/RDMA placement) can
// feed it without touching the reconciler.
package builderpod

import (
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
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
func Peers(run string, units int32) []string {
	peers := make([]string, units)
	svc := ServiceName(run)
	port := strconv.Itoa(DataPort)
	for r := range units {
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

func ownerRef(run *ebv1.EventBuilderRun) []metav1.OwnerReference {
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
			OwnerReferences: ownerRef(run),
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

// Args is the eb-builder command line of a rank.
func Args(run *ebv1.EventBuilderRun, rank int32) []string {
	b := run.Spec.Builder
	// The API server defaults the source; nil only in hand-made objects.
	var fragmentSize int32
	if b.Source != nil && b.Source.Generator != nil {
		fragmentSize = b.Source.Generator.FragmentSize
	}
	return []string{
		"--rank", strconv.Itoa(int(rank)),
		"--peers", strings.Join(Peers(run.Name, run.Spec.Units), ","),
		"--http-port", strconv.Itoa(HTTPPort),
		"--packing-factor", strconv.Itoa(int(b.PackingFactor)),
		"--fragment-size", strconv.Itoa(int(fragmentSize)),
	}
}

// Pod renders the pod of one rank of a run.
func Pod(run *ebv1.EventBuilderRun, rank int32) *corev1.Pod {
	labels := Selector(run.Name)
	labels[LabelRank] = strconv.Itoa(int(rank))
	name := PodName(run.Name, rank)

	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       run.Namespace,
			Labels:          labels,
			OwnerReferences: ownerRef(run),
		},
		Spec: corev1.PodSpec{
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
				Args:            Args(run, rank),
				Ports: []corev1.ContainerPort{
					{Name: DataPortName, ContainerPort: DataPort, Protocol: corev1.ProtocolTCP},
					{Name: HTTPPortName, ContainerPort: HTTPPort, Protocol: corev1.ProtocolTCP},
				},
				Resources: *run.Spec.Resources.DeepCopy(),
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
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
				// The root filesystem is read-only; give the builder a scratch dir.
				VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
			}},
			Volumes: []corev1.Volume{{
				Name:         "tmp",
				VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
			}},
		},
	}
}
