package builderpod

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

func productionRun() *ebv1.EventBuilderRun {
	run := testRun("prod", 4)
	run.Spec.Builder.PackingFactor = 1000
	run.Spec.Builder.Source = &ebv1.SourceSpec{Shm: &ebv1.ShmSource{RingMiB: 16, Driver: ebv1.SideContainer{
		Image: "cards/driver:1", Args: []string{"--fragment-size", "128"},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
	}}}
	run.Spec.Builder.Output = &ebv1.OutputSpec{Shm: &ebv1.ShmOutput{RingMiB: 8, Consumer: ebv1.SideContainer{
		Image: "hlt/consumer:2", Command: []string{"eb-consumer"}, Args: []string{"--fragment-size", "128"},
	}}}
	return run
}

func envOf(c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	return env
}

func mountsOf(c corev1.Container) []string {
	var paths []string
	for _, m := range c.VolumeMounts {
		paths = append(paths, m.MountPath)
	}
	return paths
}

// The production data flow: the readout driver a native sidecar started
// before the builder, the consumer beside it, all three sharing a
// memory-backed /dev/shm and told their rings' names.
func TestProductionPodRunsDriverBuilderAndConsumer(t *testing.T) {
	pod := Pod(productionRun(), 3, nil, "uid")
	builder := pod.Spec.Containers[0]
	args := strings.Join(builder.Args, " ")
	if !strings.Contains(args, "--source shm --output shm --ring-mib 8") || strings.Contains(args, "--fragment-size") {
		t.Errorf("builder args %q", args)
	}
	if len(pod.Spec.InitContainers) != 1 || len(pod.Spec.Containers) != 2 {
		t.Fatalf("init %d, containers %d; want the driver and builder + consumer", len(pod.Spec.InitContainers), len(pod.Spec.Containers))
	}
	driver, consumer := pod.Spec.InitContainers[0], pod.Spec.Containers[1]
	if driver.Name != DriverContainerName || driver.RestartPolicy == nil || *driver.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("driver %s restart %v: want a native sidecar", driver.Name, driver.RestartPolicy)
	}
	if driver.Image != "cards/driver:1" || !slices.Equal(driver.Args, []string{"--fragment-size", "128"}) ||
		driver.Resources.Limits.Memory().String() != "64Mi" {
		t.Errorf("driver %+v", driver)
	}
	if consumer.Name != ConsumerContainerName || consumer.Image != "hlt/consumer:2" || !slices.Equal(consumer.Command, []string{"eb-consumer"}) {
		t.Errorf("consumer %+v", consumer)
	}
	for name, want := range map[string]map[string]string{
		"driver": {EnvRank: "3", EnvPackingFactor: "1000", EnvMFPRing: "/eb-eb-3-mfp", EnvMFPRingMiB: "16",
			EnvRankTable: "/etc/eventbuilder/ranks.json"},
		"consumer": {EnvRank: "3", EnvPackingFactor: "1000", EnvMEPRing: "/eb-eb-3-mep"},
	} {
		c := map[string]corev1.Container{"driver": driver, "consumer": consumer}[name]
		got := envOf(c)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s env %s=%q, want %q", name, k, got[k], v)
			}
		}
		if !reflect.DeepEqual(c.SecurityContext, builder.SecurityContext) {
			t.Errorf("%s runs as %+v, the builder as %+v: the rings must be theirs to share", name, c.SecurityContext, builder.SecurityContext)
		}
	}
	for name, c := range map[string]corev1.Container{"builder": builder, "driver": driver, "consumer": consumer} {
		if !slices.Contains(mountsOf(c), "/dev/shm") {
			t.Errorf("%s mounts %v, no /dev/shm", name, mountsOf(c))
		}
	}
	if !slices.Contains(mountsOf(driver), "/etc/eventbuilder") || !slices.Contains(mountsOf(consumer), "/etc/eventbuilder") {
		t.Errorf("driver mounts %v, consumer %v: both are told EB_RANK_TABLE", mountsOf(driver), mountsOf(consumer))
	}
	if pod.Spec.ShareProcessNamespace == nil || !*pod.Spec.ShareProcessNamespace {
		t.Errorf("the containers do not see one another's processes: the rings could not tell a dead peer")
	}
	var shm *corev1.Volume
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == shmVolume {
			shm = &pod.Spec.Volumes[i]
		}
	}
	if shm == nil || shm.EmptyDir == nil || shm.EmptyDir.Medium != corev1.StorageMediumMemory {
		t.Errorf("shm volume %+v, want a memory-backed emptyDir", shm)
	}
}

// Only the side of the flow that is asked for is there: a generator run
// with a consumer has no driver, a driver run that discards no consumer;
// a run with neither renders as it always did.
func TestPodHasOnlyTheRingsItUses(t *testing.T) {
	consumerOnly := productionRun()
	consumerOnly.Spec.Builder.Source = &ebv1.SourceSpec{Generator: &ebv1.GeneratorSource{FragmentSize: 128}}
	pod := Pod(consumerOnly, 0, nil, "uid")
	if len(pod.Spec.InitContainers) != 0 || len(pod.Spec.Containers) != 2 ||
		!strings.Contains(strings.Join(pod.Spec.Containers[0].Args, " "), "--fragment-size 128") {
		t.Errorf("generator + consumer: init %d, containers %d, args %v", len(pod.Spec.InitContainers), len(pod.Spec.Containers),
			pod.Spec.Containers[0].Args)
	}
	driverOnly := productionRun()
	driverOnly.Spec.Builder.Output = &ebv1.OutputSpec{Discard: &ebv1.DiscardOutput{}}
	if pod := Pod(driverOnly, 0, nil, "uid"); len(pod.Spec.InitContainers) != 1 || len(pod.Spec.Containers) != 1 {
		t.Errorf("driver + discard: init %d, containers %d", len(pod.Spec.InitContainers), len(pod.Spec.Containers))
	}
	plain := Pod(testRun("demo", 2), 0, nil, "uid")
	for _, v := range plain.Spec.Volumes {
		if v.Name == shmVolume {
			t.Errorf("a generator run got a shm volume")
		}
	}
	if len(plain.Spec.InitContainers) != 0 || len(plain.Spec.Containers) != 1 {
		t.Errorf("a generator run got side containers")
	}
}

// A new driver or consumer (image, args) replaces the pods.
func TestSideContainersAreInTheSpecHash(t *testing.T) {
	base := Pod(productionRun(), 0, nil, "uid").Annotations[SpecHashAnnotation]
	driver := productionRun()
	driver.Spec.Builder.Source.Shm.Driver.Args = []string{"--fragment-size", "256"}
	consumer := productionRun()
	consumer.Spec.Builder.Output.Shm.Consumer.Image = "hlt/consumer:3"
	for name, run := range map[string]*ebv1.EventBuilderRun{"driver args": driver, "consumer image": consumer} {
		if Pod(run, 0, nil, "uid").Annotations[SpecHashAnnotation] == base {
			t.Errorf("%s changed but the spec hash did not", name)
		}
	}
}

// The scheduler places the pod by the sum of its containers' requests, the
// sidecar driver's included: preflight sums the same.
func TestRequestsSumTheSideContainers(t *testing.T) {
	run := productionRun()
	run.Spec.Resources.CPUs = 2
	run.Spec.Resources.Memory = ptr.To(resource.MustParse("1Gi"))
	run.Spec.Builder.Source.Shm.Driver.Resources.Requests = corev1.ResourceList{
		corev1.ResourceMemory: resource.MustParse("64Mi"), "daq.io/tell40": resource.MustParse("1")}
	run.Spec.Builder.Output.Shm.Consumer.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
	run.Spec.Builder.Output.Shm.Consumer.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}
	got := Requests(run, nil)
	if got.Cpu().String() != "2500m" || got.Memory().String() != "1120Mi" || got.Name("daq.io/tell40", resource.DecimalSI).Value() != 1 {
		t.Errorf("requests %v", got)
	}
	if plain := Requests(testRun("demo", 2), nil); len(plain) != 0 {
		t.Errorf("a run without resources asks for %v", plain)
	}
}

// The cards go to the container that reads them: a driver asks for its
// endpoint's streams of its NUMA node's readout resource, the builder for
// none; without a driver the builder keeps readout.count; a folded unit on
// an endpoint without fibres has no driver and asks for no card.
func TestReadoutStreamsGoToTheDriver(t *testing.T) {
	run := productionRun()
	run.Spec.Resources.Readout = &ebv1.ReadoutResource{Resource: "daq.io/tell40-numa{numa}", Count: 1}
	place := &Placement{Endpoint: "eb0-numa1", Node: "eb0", NUMA: 1, Streams: []string{"velo0", "velo1", "velo2"}}
	pod := Pod(run, 2, place, "uid")
	driver, builder := pod.Spec.InitContainers[0], pod.Spec.Containers[0]
	if got := driver.Resources.Limits.Name("daq.io/tell40-numa1", resource.DecimalSI).Value(); got != 3 {
		t.Errorf("driver asks for %d of daq.io/tell40-numa1, want the endpoint's 3 streams: %v", got, driver.Resources)
	}
	if driver.Resources.Limits.Memory().String() != "64Mi" {
		t.Errorf("driver lost its own limits: %v", driver.Resources)
	}
	if _, ok := builder.Resources.Limits["daq.io/tell40-numa1"]; ok {
		t.Errorf("builder asks for the cards too: %v", builder.Resources)
	}
	if got := Requests(run, place)["daq.io/tell40-numa1"]; got.Value() != 3 {
		t.Errorf("preflight counts %d streams, want 3", got.Value())
	}
	// A folded unit on an endpoint without fibres runs its BU alone: no
	// driver, no card (a spare server may have none); an unfolded one may
	// run an RU there, so it keeps both.
	spare := &Placement{Endpoint: "sp0-numa1", Node: "sp0", NUMA: 1, WithoutFibres: true}
	if p := Pod(run, 3, spare, "uid"); len(p.Spec.InitContainers) != 0 || len(p.Spec.Containers) != 2 {
		t.Errorf("a folded unit without fibres: %d init containers, %d containers; want no driver, the builder and its consumer",
			len(p.Spec.InitContainers), len(p.Spec.Containers))
	}
	if got, ok := Requests(run, spare)["daq.io/tell40-numa1"]; ok {
		t.Errorf("a folded unit without fibres asks for %s cards, want none", got.String())
	}
	unfolded := run.DeepCopy()
	unfolded.Spec.Layout = ebv1.LayoutUnfolded
	if p := Pod(unfolded, 3, spare, "uid"); len(p.Spec.InitContainers) != 1 {
		t.Errorf("an unfolded unit without fibres: %d init containers, want its driver", len(p.Spec.InitContainers))
	}
	generator := run.DeepCopy()
	generator.Spec.Builder.Source = &ebv1.SourceSpec{Generator: &ebv1.GeneratorSource{FragmentSize: 128}}
	if got := Pod(generator, 2, place, "uid").Spec.Containers[0].Resources.Limits["daq.io/tell40-numa1"]; got.Value() != 1 {
		t.Errorf("a run without a driver: the builder asks for %d cards, want readout.count 1", got.Value())
	}
}

// A file source: each rank replays its own file from the claim, mounted
// read-only in the builder.
func TestFileSourceMountsTheClaimAndNamesTheRanksFile(t *testing.T) {
	run := testRun("replay", 2)
	run.Spec.Builder.Source = &ebv1.SourceSpec{File: &ebv1.FileSource{ClaimName: "recorded", Path: "run255003/source-{rank}.mfp"}}
	run.Spec.Builder.Output = &ebv1.OutputSpec{Discard: &ebv1.DiscardOutput{}}
	pod := Pod(run, 1, nil, "uid")
	args := strings.Join(pod.Spec.Containers[0].Args, " ")
	if !strings.Contains(args, "--source file --source-file /var/lib/eventbuilder/source/run255003/source-1.mfp") ||
		strings.Contains(args, "--fragment-size") {
		t.Errorf("args %q", args)
	}
	var claim *corev1.PersistentVolumeClaimVolumeSource
	for _, v := range pod.Spec.Volumes {
		if v.Name == "source" {
			claim = v.PersistentVolumeClaim
		}
	}
	if claim == nil || claim.ClaimName != "recorded" || !claim.ReadOnly || !slices.Contains(mountsOf(pod.Spec.Containers[0]), SourceDir) {
		t.Errorf("claim %+v, mounts %v", claim, mountsOf(pod.Spec.Containers[0]))
	}
	if len(pod.Spec.InitContainers) != 0 {
		t.Errorf("a file source got a driver")
	}
}
