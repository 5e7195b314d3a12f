// Pins the RDMA shared device plugin (Mellanox/NVIDIA), whose configuration
// the chart renders: make builds checkconfig from here, which runs the
// plugin's own configuration parser and validator over a config.json (the
// chart's rendered one, in make test-chart).
module daq.io/eventbuilder/tools/rdma-shared-dp

go 1.26.8

require github.com/Mellanox/k8s-rdma-shared-dev-plugin v1.5.3

require (
	github.com/Mellanox/rdmamap v1.1.0 // indirect
	github.com/StackExchange/wmi v1.2.1 // indirect
	github.com/container-orchestrated-devices/container-device-interface v0.5.4 // indirect
	github.com/fsnotify/fsnotify v1.5.1 // indirect
	github.com/go-ole/go-ole v1.2.6 // indirect
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/jaypipes/ghw v0.16.0 // indirect
	github.com/jaypipes/pcidb v1.0.1 // indirect
	github.com/mitchellh/go-homedir v1.1.0 // indirect
	github.com/opencontainers/runc v1.1.14 // indirect
	github.com/opencontainers/runtime-spec v1.1.0 // indirect
	github.com/opencontainers/runtime-tools v0.9.1-0.20221107090550-2e043c6bd626 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/syndtr/gocapability v0.0.0-20200815063812-42c35b437635 // indirect
	github.com/vishvananda/netlink v1.3.0 // indirect
	github.com/vishvananda/netns v0.0.4 // indirect
	golang.org/x/mod v0.17.0 // indirect
	golang.org/x/net v0.37.0 // indirect
	golang.org/x/sys v0.31.0 // indirect
	golang.org/x/text v0.23.0 // indirect
	google.golang.org/genproto v0.0.0 // indirect
	google.golang.org/grpc v1.56.3 // indirect
	google.golang.org/protobuf v1.36.5 // indirect
	gopkg.in/yaml.v2 v2.4.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
	howett.net/plist v1.0.0 // indirect
	k8s.io/kubelet v0.27.16 // indirect
	sigs.k8s.io/yaml v1.3.0 // indirect
)

// As the plugin's own go.mod: google.golang.org/genproto v0.0.0 is not a real
// version (the proxy refuses it); the plugin replaces it so.
replace google.golang.org/genproto v0.0.0 => github.com/googleapis/go-genproto v0.0.0-20200117163144-32f20d992d24
