// eventbuilder-dra is the event builder's DRA kubelet plugin (driver
// eventbuilder.daq.io): on its node it publishes every RDMA NIC and one
// device per readout stream, each with its PCIe root, PCI bus ID and NUMA
// node, so that a pod's claim asks for "a readout card and an RDMA NIC on
// the same PCIe root" and the scheduler decides before the pod lands; it
// prepares a claim by writing the CDI spec that gives the container both
// (internal/dradriver, internal/dradevices). It rediscovers every
// --rediscover-every, republishes what changed (a NIC's port going down
// shows in its portState) and tells the kubelet the devices' health.
package main

import (
	"flag"
	"fmt"
	"os"
	"reflect"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"daq.io/eventbuilder/operator/internal/dradevices/sysfsemu"
	"daq.io/eventbuilder/operator/internal/dradriver"
	"daq.io/eventbuilder/operator/internal/readoutcards"
)

func main() {
	node := flag.String("node", os.Getenv("NODE_NAME"), "this node's name: its pool, and its entry in --readout-config (default $NODE_NAME)")
	sys := flag.String("sys-root", "/sys", "the sysfs to discover devices from")
	emulated := flag.String("emulated-sysfs", "", "test clusters without the hardware (kind): a file of emulated servers by node "+
		"(sysfsemu.Config); this node's tree is written to a temporary directory and read in place of --sys-root, its devices published as emulated")
	cdiDir := flag.String("cdi-dir", "/var/run/cdi", "where the container runtime reads CDI specs")
	devRoot := flag.String("dev-root", "/", "where the node's /dev is seen: a readout stream is healthy while its card's device node exists")
	readout := flag.String("readout-config", "", "the farm's readout card configuration (the readout device plugin's JSON); empty: no cards")
	pluginDir := flag.String("plugin-dir", "/var/lib/kubelet/plugins/"+dradriver.DriverName, "the directory of the plugin's socket")
	registrarDir := flag.String("registrar-dir", kubeletplugin.KubeletRegistryDir, "the kubelet's plugin registration directory")
	every := flag.Duration("rediscover-every", 30*time.Second, "how often the node's devices are discovered again and republished if changed")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	log := zap.New(zap.UseFlagOptions(&opts)).WithValues("node", *node)
	ctrl.SetLogger(log)
	if *node == "" || *every <= 0 {
		fail("--node (or NODE_NAME) is required, and --rediscover-every must be positive")
	}
	var cards readoutcards.NodeConfig
	if *readout != "" {
		raw, err := os.ReadFile(*readout)
		if err != nil {
			fail(fmt.Sprintf("--readout-config: %v", err))
		}
		farm, err := readoutcards.ParseConfig(raw)
		if err != nil {
			fail(fmt.Sprintf("%s: %v", *readout, err))
		}
		cards = farm.Nodes[*node]
	}
	if *emulated != "" {
		root, err := emulate(*emulated, *node)
		if err != nil {
			fail(fmt.Sprintf("--emulated-sysfs %s: %v", *emulated, err))
		}
		*sys = root
		log.Info("reading an emulated sysfs", "root", root)
	}
	config, err := ctrl.GetConfig()
	if err != nil {
		fail(err.Error())
	}
	ctx := ctrl.SetupSignalHandler()
	failed := make(chan error, 1)
	// Health is sent after each discovery: the kubelet takes it for
	// unknown after three rounds without word.
	driver := &dradriver.Driver{Node: *node, Sys: *sys, CDIDir: *cdiDir, Cards: cards, DevRoot: *devRoot, HealthTimeout: 3 * *every,
		Fail: func(err error) {
			select {
			case failed <- err:
			default:
			}
		}}
	// The helper listens in the plugin's directory but does not make it.
	if err := os.MkdirAll(*pluginDir, 0o750); err != nil {
		fail(fmt.Sprintf("--plugin-dir: %v", err))
	}
	helper, err := kubeletplugin.Start(ctx, driver, kubeletplugin.KubeClient(kubernetes.NewForConfigOrDie(config)),
		kubeletplugin.DriverName(dradriver.DriverName), kubeletplugin.NodeName(*node),
		kubeletplugin.PluginDataDirectoryPath(*pluginDir), kubeletplugin.RegistrarDirectoryPath(*registrarDir))
	if err != nil {
		fail(err.Error())
	}
	defer helper.Stop()
	var published any
	for {
		resources, err := driver.Resources()
		switch {
		case err != nil:
			// Said at once, and again each round until mended; what was
			// published stays.
			log.Error(err, "discovering the node's devices")
		case !reflect.DeepEqual(resources, published):
			if err := helper.PublishResources(ctx, resources); err != nil {
				fail(err.Error())
			}
			published = resources
			log.Info("published the node's devices", "devices", len(resources.Pools[*node].Slices[0].Devices))
		}
		select {
		case <-ctx.Done():
			return
		case err := <-failed:
			fail(err.Error())
		case <-time.After(*every):
		}
	}
}

// emulate writes node's emulated server of the configuration file to a
// temporary directory, and returns it.
func emulate(file, node string) (string, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	config, err := sysfsemu.ParseConfig(raw)
	if err != nil {
		return "", err
	}
	server, ok := config.Nodes[node]
	if !ok {
		return "", fmt.Errorf("no emulated server for node %s: add nodes[%s], or run the driver on the nodes listed", node, node)
	}
	root, err := os.MkdirTemp("", "emulated-sysfs")
	if err != nil {
		return "", err
	}
	return root, server.Emulate(root)
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "eventbuilder-dra: "+msg)
	os.Exit(2)
}
