// readout-device-plugin advertises a node's readout cards to the kubelet
// (device-plugin API v1beta1): one extended resource per NUMA node whose
// devices are the streams its cards read, each on its NUMA node so the
// Topology Manager aligns it with the pod's CPUs. A container allocated
// some gets their cards' device nodes and EB_READOUT_* variables naming
// them (internal/readoutcards). The chart runs it as a DaemonSet with the
// farm's card configuration; on a test cluster the cards are emulated and
// the configuration says so.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"daq.io/eventbuilder/operator/internal/readoutcards"
)

func main() {
	config := flag.String("config", "/etc/eventbuilder/readout-cards/config.json", "the farm's readout card configuration (JSON; see charts/eventbuilder-operator values readoutDevicePlugin.config)")
	node := flag.String("node", os.Getenv("NODE_NAME"), "this node's name, its entry in the configuration (default $NODE_NAME)")
	dir := flag.String("plugin-dir", pluginapi.DevicePluginPath, "the kubelet's device-plugin directory")
	every := flag.Duration("check-every", 5*time.Second, "how often device health and the plugin's sockets are checked")
	devRoot := flag.String("dev-root", "", "where the host's device nodes are seen, prefixed to each card's /dev node for its health (the chart mounts the host's /dev at /host/dev: --dev-root=/host)")
	sysRoot := flag.String("sys-root", "/sys", "where the machine's sysfs is seen, for its NUMA nodes (devices/system/node/node<N>)")
	check := flag.Bool("check-config", false, "check the configuration, print each node's resources and exit (0: valid, 2: not)")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	log := zap.New(zap.UseFlagOptions(&opts))

	if *check {
		os.Exit(checkConfig(*config))
	}
	if *node == "" || *every <= 0 {
		fmt.Fprintln(os.Stderr, "readout-device-plugin: --node (or NODE_NAME) is required, and --check-every must be positive")
		os.Exit(2)
	}
	raw, err := os.ReadFile(*config)
	if err != nil {
		fmt.Fprintf(os.Stderr, "readout-device-plugin: --config: %v\n", err)
		os.Exit(2)
	}
	farm, err := readoutcards.ParseConfig(raw)
	if err != nil {
		fmt.Fprintf(os.Stderr, "readout-device-plugin: %s: %v\n", *config, err)
		os.Exit(2)
	}
	nodeCards, ok := farm.Nodes[*node]
	if !ok {
		log.Info("this node has no entry in the configuration: it offers no readout streams", "node", *node)
	}
	ctx := ctrl.SetupSignalHandler()
	if err := readoutcards.Run(ctx, readoutcards.Options{Dir: *dir, Prefix: farm.ResourcePrefix, Node: nodeCards,
		CheckEvery: *every, DevRoot: *devRoot, MachineNUMA: readoutcards.MachineNUMANodes(*sysRoot), Log: log.WithValues("node", *node)}); err != nil {
		log.Error(err, "readout device plugin")
		os.Exit(1)
	}
}

// checkConfig validates a configuration file with the plugin's own parser,
// as the chart's tests do with what the chart renders.
func checkConfig(path string) int {
	raw, err := os.ReadFile(path)
	if err == nil {
		var farm readoutcards.FarmConfig
		if farm, err = readoutcards.ParseConfig(raw); err == nil {
			for node, cards := range farm.Nodes {
				for _, r := range readoutcards.Resources(farm.ResourcePrefix, cards) {
					fmt.Printf("%s: %s %d streams\n", node, r.Name, len(r.Devices))
				}
			}
			return 0
		}
	}
	fmt.Fprintf(os.Stderr, "readout-device-plugin: %s: %v\n", path, err)
	return 2
}
