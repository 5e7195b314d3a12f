package builderpod

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/ranktable"
)

// The production data flow (spec.builder.source.shm, spec.builder.output.shm):
// a readout driver container writes the unit's MFPs into a shared-memory
// ring, the builder reads it and writes MEPs into another, which a
// consumer container reads. The three share the pod's memory-backed
// /dev/shm; the driver runs as a native sidecar (an init container that
// keeps running), so it starts before the builder and stops after it.
const (
	DriverContainerName   = "readout-driver"
	ConsumerContainerName = "consumer"
	shmVolume             = "shm"
	shmDir                = "/dev/shm"

	// What the driver and the consumer are told of the unit: its rank,
	// the packing factor, and their ring's POSIX shared-memory name (and
	// for the driver its size and the rank table, whose number of BUs
	// decides how many MFPs the RU holds at once).
	EnvRank          = "EB_RANK"
	EnvPackingFactor = "EB_PACKING_FACTOR"
	EnvMFPRing       = "EB_MFP_RING"
	EnvMFPRingMiB    = "EB_MFP_RING_MIB"
	EnvMEPRing       = "EB_MEP_RING"
)

// ringName is the POSIX name of a unit's ring, as eb-builder names it with
// its default --run: each pod has a /dev/shm of its own.
func ringName(rank int32, what string) string {
	return "/eb-eb-" + strconv.Itoa(int(rank)) + "-" + what
}

// shmSource and shmOutput are the run's shared-memory source and output, or nil.
func shmSource(b ebv1.BuilderSpec) *ebv1.ShmSource {
	if b.Source == nil {
		return nil
	}
	return b.Source.Shm
}

func fileSource(b ebv1.BuilderSpec) *ebv1.FileSource {
	if b.Source == nil {
		return nil
	}
	return b.Source.File
}

// SourceDir is where a file source's volume is mounted in the builder.
const SourceDir = "/var/lib/eventbuilder/source"

// sourceFile is the path of a rank's file in the builder container.
func sourceFile(f *ebv1.FileSource, rank int32) string {
	return SourceDir + "/" + strings.ReplaceAll(f.Path, "{rank}", strconv.Itoa(int(rank)))
}

func shmOutput(b ebv1.BuilderSpec) *ebv1.ShmOutput {
	if b.Output == nil {
		return nil
	}
	return b.Output.Shm
}

// dataflowArgs are the builder flags of the run's source rings or file
// and output ring.
func dataflowArgs(b ebv1.BuilderSpec, rank int32) []string {
	var args []string
	if shmSource(b) != nil {
		args = append(args, "--source", "shm")
	}
	if f := fileSource(b); f != nil {
		args = append(args, "--source", "file", "--source-file", sourceFile(f, rank))
	}
	if out := shmOutput(b); out != nil {
		args = append(args, "--output", "shm", "--ring-mib", strconv.Itoa(int(out.RingMiB)))
	}
	return args
}

// addDataflow adds the driver and the consumer of a run with rings to the
// pod, and the /dev/shm they share with the builder (pod.Spec.Containers[0]).
// unitEnv is what every container is told of the unit.
func addDataflow(pod *corev1.Pod, run *ebv1.EventBuilderRun, rank int32, place *Placement, unitEnv []corev1.EnvVar, sc *corev1.SecurityContext) {
	if f := fileSource(run.Spec.Builder); f != nil {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "source", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: f.ClaimName, ReadOnly: true},
		}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: "source", MountPath: SourceDir, ReadOnly: true})
	}
	src, out := shmSource(run.Spec.Builder), shmOutput(run.Spec.Builder)
	if src == nil && out == nil {
		return
	}
	// The rings tell a live peer from a dead one by its process id: the
	// three containers must see one another's.
	pod.Spec.ShareProcessNamespace = ptr.To(true)
	shm := corev1.VolumeMount{Name: shmVolume, MountPath: shmDir}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: shmVolume, VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory},
	}})
	builder := &pod.Spec.Containers[0]
	builder.VolumeMounts = append(builder.VolumeMounts, shm)
	env := append(append([]corev1.EnvVar(nil), unitEnv...),
		corev1.EnvVar{Name: EnvRank, Value: strconv.Itoa(int(rank))},
		corev1.EnvVar{Name: EnvPackingFactor, Value: strconv.Itoa(int(run.Spec.Builder.PackingFactor))})
	if src != nil && readsStreams(run, place) {
		driver := sideContainer(DriverContainerName, src.Driver, sc, append(env,
			corev1.EnvVar{Name: EnvMFPRing, Value: ringName(rank, "mfp")},
			corev1.EnvVar{Name: EnvMFPRingMiB, Value: strconv.Itoa(int(src.RingMiB))}))
		if name, count, ok := readoutRequest(run, place); ok {
			driver.Resources = *driver.Resources.DeepCopy()
			if driver.Resources.Limits == nil {
				driver.Resources.Limits = corev1.ResourceList{}
			}
			driver.Resources.Limits[name] = count
			if driver.Resources.Requests != nil {
				driver.Resources.Requests[name] = count
			}
		}
		driver.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, driver)
	}
	if out != nil {
		pod.Spec.Containers = append(pod.Spec.Containers, sideContainer(ConsumerContainerName, out.Consumer, sc,
			append(env, corev1.EnvVar{Name: EnvMEPRing, Value: ringName(rank, "mep")})))
	}
}

// sideContainer renders a driver or consumer with the builder's security
// context (the rings are created for the builder's user) and /dev/shm.
func sideContainer(name string, c ebv1.SideContainer, sc *corev1.SecurityContext, env []corev1.EnvVar) corev1.Container {
	return corev1.Container{
		Name:            name,
		Image:           c.Image,
		ImagePullPolicy: c.ImagePullPolicy,
		Command:         c.Command,
		Args:            c.Args,
		Env:             env,
		Resources:       c.Resources,
		SecurityContext: sc.DeepCopy(),
		// The rings, a scratch dir, and the rank table as the builder has
		// it (EB_RANK_TABLE).
		VolumeMounts: []corev1.VolumeMount{{Name: shmVolume, MountPath: shmDir}, {Name: "tmp", MountPath: "/tmp"},
			{Name: "ranks", MountPath: ranktable.MountDir, ReadOnly: true}},
	}
}

// builderResources are the run's unit resources as the builder container
// asks for them: a readout driver's pod gives the cards to the driver, which
// reads them, not to the builder.
func builderResources(run *ebv1.EventBuilderRun) ebv1.UnitResources {
	r := run.Spec.Resources
	if shmSource(run.Spec.Builder) != nil {
		r.Readout = nil
	}
	return r
}

// readsStreams says whether a unit at place may run an RU that reads
// streams: not a folded unit on an endpoint without fibres (the planner
// gives it its BU alone). An unfolded run may still put an RU there.
func readsStreams(run *ebv1.EventBuilderRun, place *Placement) bool {
	return place == nil || !place.WithoutFibres || run.Spec.Layout == ebv1.LayoutUnfolded
}

// readoutRequest is what a readout driver asks of spec.resources.readout:
// the resource of its endpoint's NUMA node, one device per stream the
// endpoint reads (readout.count where the Fabric lists none).
func readoutRequest(run *ebv1.EventBuilderRun, place *Placement) (corev1.ResourceName, resource.Quantity, bool) {
	rd := run.Spec.Resources.Readout
	if rd == nil || shmSource(run.Spec.Builder) == nil || !readsStreams(run, place) {
		return "", resource.Quantity{}, false
	}
	numa, count := 0, int64(max(rd.Count, 1))
	if place != nil {
		numa = place.NUMA
		if len(place.Streams) > 0 {
			count = int64(len(place.Streams))
		}
	}
	return corev1.ResourceName(numaName(rd.Resource, numa)), *resource.NewQuantity(count, resource.DecimalSI), true
}

// Requests is what a unit's pod asks the scheduler for on its node (place
// nil: a run without a Fabric): the builder's requests and those of its
// readout driver (a sidecar runs throughout, with its cards) and consumer,
// summed.
func Requests(run *ebv1.EventBuilderRun, place *Placement) corev1.ResourceList {
	numa := 0
	if place != nil {
		numa = place.NUMA
	}
	sum := Resources(builderResources(run), numa).Requests.DeepCopy()
	var sides []ebv1.SideContainer
	if src := shmSource(run.Spec.Builder); src != nil && readsStreams(run, place) {
		sides = append(sides, src.Driver)
	}
	if out := shmOutput(run.Spec.Builder); out != nil {
		sides = append(sides, out.Consumer)
	}
	if name, count, ok := readoutRequest(run, place); ok {
		sides = append(sides, ebv1.SideContainer{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{name: count}}})
	}
	for _, c := range sides {
		// A limit without a request is the request too (as the API server defaults it).
		asked := c.Resources.Requests.DeepCopy()
		for name, q := range c.Resources.Limits {
			if _, ok := asked[name]; !ok {
				if asked == nil {
					asked = corev1.ResourceList{}
				}
				asked[name] = q
			}
		}
		for name, q := range asked {
			if sum == nil {
				sum = corev1.ResourceList{}
			}
			total := sum[name]
			total.Add(q)
			sum[name] = total
		}
	}
	return sum
}
