package dradriver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	drahealth "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	"sigs.k8s.io/yaml"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/dradevices"
	"daq.io/eventbuilder/operator/internal/dradevices/sysfstest"
	"daq.io/eventbuilder/operator/internal/readoutcards"
	"daq.io/eventbuilder/operator/internal/testenv"
)

// The driver on a real API server, served by the DRA helper library's own
// gRPC servers, called as the kubelet calls them: it publishes the node's
// NIC and readout streams as a ResourceSlice, and a claim allocated a NIC
// and two streams on one PCIe root is prepared into a CDI spec that gives
// the container both, then unprepared (twice: the kubelet may ask again);
// the kubelet's health watch hears of a NIC's port going down and a card's
// device node appearing.
func TestTheDriverPublishesTheNodeAndPreparesAClaimAsTheKubeletAsks(t *testing.T) {
	env := testenv.StartForTest(t, "../../..")
	clients := kubernetes.NewForConfigOrDie(env.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node, err := clients.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "eb0"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	sys := sysfstest.New(t)
	sys.NIC(sys.PCI("pci0000:00", "0000:3b:00.0", 0), "mlx5_0", "InfiniBand", "4: ACTIVE", map[int]string{0: "IB fe80:0000:0000:0000:0002:c903:0000:0002"})
	sys.Write("class/infiniband_verbs/uverbs0/ibdev", "mlx5_0")
	sys.PCI("pci0000:00", "0000:3c:00.0", 0)
	devRoot := t.TempDir() // the node's /dev as the driver sees it: the card's node not there yet
	driver := &Driver{Node: node.Name, Sys: sys.Root, CDIDir: t.TempDir(), Cards: readoutcards.NodeConfig{Cards: []readoutcards.Card{
		{Name: "tell40-0", NUMA: 0, Device: "/dev/pcie40_0", PCIAddress: "0000:3c:00.0", Streams: []string{"velo0", "velo1"}}}},
		DevRoot: devRoot, HealthTimeout: 90 * time.Second,
		Fail: func(err error) { t.Errorf("the plugin failed: %v", err) }}
	plugin, registrar := socketDir(t), socketDir(t)
	helper, err := kubeletplugin.Start(ctx, driver, kubeletplugin.KubeClient(clients), kubeletplugin.DriverName(DriverName),
		kubeletplugin.NodeName(node.Name), kubeletplugin.NodeUID(node.UID),
		kubeletplugin.PluginDataDirectoryPath(plugin), kubeletplugin.RegistrarDirectoryPath(registrar))
	if err != nil {
		t.Fatal(err)
	}
	defer helper.Stop()
	resources, err := driver.Resources()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.PublishResources(ctx, resources); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the node's ResourceSlice", func() error {
		slices, err := clients.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var names []string
		for _, s := range slices.Items {
			if s.Spec.Driver == DriverName && s.Spec.NodeName != nil && *s.Spec.NodeName == node.Name && s.Spec.Pool.Name == node.Name {
				for _, d := range s.Spec.Devices {
					names = append(names, d.Name)
				}
			}
		}
		if want := []string{"nic-mlx5-0", "stream-tell40-0-velo0", "stream-tell40-0-velo1"}; !equalSets(names, want) {
			return fmt.Errorf("published %v, want %v", names, want)
		}
		return nil
	})

	// A claim as the scheduler leaves it: allocated on this node.
	claim, err := clients.ResourceV1().ResourceClaims("default").Create(ctx, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "unit-0"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
			{Name: "nic", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "eventbuilder-rdma"}},
			{Name: "readout", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "eventbuilder-readout",
				AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2}},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	result := func(request, device string) resourceapi.DeviceRequestAllocationResult {
		return resourceapi.DeviceRequestAllocationResult{Request: request, Driver: DriverName, Pool: node.Name, Device: device}
	}
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		result("nic", "nic-mlx5-0"), result("readout", "stream-tell40-0-velo0"), result("readout", "stream-tell40-0-velo1")}}}
	if claim, err = clients.ResourceV1().ResourceClaims("default").UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	conn, err := grpc.NewClient("unix://"+filepath.Join(plugin, "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	kubelet := drapb.NewDRAPluginClient(conn)
	asked := []*drapb.Claim{{Namespace: claim.Namespace, Name: claim.Name, Uid: string(claim.UID)}}
	prepared, err := kubelet.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: asked})
	if err != nil {
		t.Fatal(err)
	}
	got := prepared.Claims[string(claim.UID)]
	if got == nil || got.Error != "" || len(got.Devices) != 3 {
		t.Fatalf("prepared %+v", prepared.Claims)
	}
	for _, d := range got.Devices {
		if !slices.Equal(d.CdiDeviceIds, []string{"eventbuilder.daq.io/claim=" + string(claim.UID)}) || d.PoolName != node.Name {
			t.Errorf("device %+v: want the claim's CDI device", d)
		}
	}
	specPath := filepath.Join(driver.CDIDir, "eventbuilder.daq.io-claim_"+string(claim.UID)+".json")
	body, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	var spec cdi.Spec
	if err := json.Unmarshal(body, &spec); err != nil || len(spec.Devices) != 1 {
		t.Fatalf("CDI spec %s: %v", body, err)
	}
	if env := spec.Devices[0].ContainerEdits.Env; !slices.Equal(env, []string{"EB_RDMA_DEVICE=mlx5_0",
		"EB_READOUT_STREAMS=velo0,velo1", "EB_READOUT_CARDS=tell40-0", "EB_READOUT_DEVICES=/dev/pcie40_0"}) {
		t.Errorf("the container's environment %v", env)
	}

	for range 2 {
		unprepared, err := kubelet.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: asked})
		if err != nil || unprepared.Claims[string(claim.UID)] == nil || unprepared.Claims[string(claim.UID)].Error != "" {
			t.Fatalf("unprepared %+v, %v", unprepared, err)
		}
	}
	if _, err := os.Stat(specPath); !os.IsNotExist(err) {
		t.Errorf("the CDI spec outlived its claim: %v", err)
	}

	// The kubelet watches the devices' health: the NIC's port ACTIVE, the
	// streams' card without its device node; then, once rediscovered, the
	// port down and the card's node there.
	watch, err := drahealth.NewDRAResourceHealthClient(conn).NodeWatchResources(ctx, &drahealth.NodeWatchResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	expectHealth := func(want map[string]drahealth.HealthStatus) {
		t.Helper()
		got, err := watch.Recv()
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]drahealth.HealthStatus{}
		for _, d := range got.Devices {
			seen[d.Device.DeviceName] = d.Health
			if d.Device.PoolName != node.Name || d.HealthCheckTimeoutSeconds != 90 || time.Since(time.Unix(d.LastUpdatedTime, 0)) > time.Minute {
				t.Errorf("device health %+v", d)
			}
		}
		if !reflect.DeepEqual(seen, want) {
			t.Errorf("health %v, want %v", seen, want)
		}
	}
	expectHealth(map[string]drahealth.HealthStatus{"nic-mlx5-0": drahealth.HealthStatus_HEALTHY,
		"stream-tell40-0-velo0": drahealth.HealthStatus_UNHEALTHY, "stream-tell40-0-velo1": drahealth.HealthStatus_UNHEALTHY})
	sys.Write("class/infiniband/mlx5_0/ports/1/state", "1: DOWN")
	if err := os.MkdirAll(filepath.Join(devRoot, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(devRoot, "dev", "pcie40_0"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := driver.Resources(); err != nil {
		t.Fatal(err)
	}
	expectHealth(map[string]drahealth.HealthStatus{"nic-mlx5-0": drahealth.HealthStatus_UNHEALTHY,
		"stream-tell40-0-velo0": drahealth.HealthStatus_HEALTHY, "stream-tell40-0-velo1": drahealth.HealthStatus_HEALTHY})
}

// socketDir is a directory for unix sockets, whose paths must stay within
// 108 bytes (t.TempDir's, named after the test, do not).
func socketDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "dra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func equalSets(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// The chart's DeviceClasses (draDriver.enabled) and a unit's claim template
// are accepted by a real API server, which compiles their CEL; each class
// selects exactly the driver's
// devices of its kind, as the scheduler evaluates them (the DRA library's
// own CEL compiler).
func TestTheChartsDeviceClassesSelectTheDriversDevicesByKind(t *testing.T) {
	env := testenv.StartForTest(t, "../../..")
	clients := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	var classes []resourceapi.DeviceClass
	for _, doc := range strings.Split(testenv.HelmTemplate(t, "../../..", "draDriver.enabled=true"), "\n---") {
		if !strings.Contains(doc, "\nkind: DeviceClass") {
			continue
		}
		var class resourceapi.DeviceClass
		if err := yaml.Unmarshal([]byte(doc), &class); err != nil {
			t.Fatal(err)
		}
		if _, err := clients.ResourceV1().DeviceClasses().Create(ctx, &class, metav1.CreateOptions{}); err != nil {
			t.Errorf("DeviceClass %s refused: %v", class.Name, err)
		}
		classes = append(classes, class)
	}
	// A unit's claim template, as the operator renders it, is accepted too
	// (its selectors compiled, its constraint checked).
	run := &ebv1.EventBuilderRun{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "default", UID: "u"}}
	run.Spec.Resources.Claims = &ebv1.DeviceClaims{AlignOn: ebv1.AlignPCIeRoot}
	template := builderpod.ClaimTemplate(run, &builderpod.Placement{Endpoint: "eb0-numa0", RDMADevice: "mlx5_0", Streams: []string{"velo0", "velo1"}})
	template.OwnerReferences = nil // no such run on this API server
	if _, err := clients.ResourceV1().ResourceClaimTemplates("default").Create(ctx, template, metav1.CreateOptions{}); err != nil {
		t.Errorf("claim template refused: %v", err)
	}

	sys := sysfstest.New(t)
	sys.NIC(sys.PCI("pci0000:00", "0000:3b:00.0", 0), "mlx5_0", "InfiniBand", "4: ACTIVE", nil)
	devices, err := dradevices.Discover(sys.Root, readoutcards.NodeConfig{Emulated: true, Cards: []readoutcards.Card{
		{Name: "emulated-0", Streams: []string{"s0"}}}})
	if err != nil {
		t.Fatal(err)
	}
	selected := map[string][]string{}
	for _, class := range classes {
		for _, selector := range class.Spec.Selectors {
			compiled := cel.GetCompiler(cel.Features{}).CompileCELExpression(selector.CEL.Expression, cel.Options{})
			if compiled.Error != nil {
				t.Fatalf("%s: %v", class.Name, compiled.Error)
			}
			for _, d := range devices {
				matches, _, err := compiled.DeviceMatches(ctx, cel.Device{Driver: DriverName, Attributes: d.Attributes})
				if err != nil {
					t.Fatalf("%s on %s: %v", class.Name, d.Name, err)
				}
				if matches {
					selected[class.Name] = append(selected[class.Name], d.Name)
				}
			}
		}
	}
	if want := map[string][]string{"eventbuilder-rdma": {"nic-mlx5-0"}, "eventbuilder-readout": {"stream-emulated-0-s0"}}; !reflect.DeepEqual(selected, want) {
		t.Errorf("selected %v, want %v", selected, want)
	}
}
