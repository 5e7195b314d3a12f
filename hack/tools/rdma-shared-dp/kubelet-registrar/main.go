// Command kubelet-registrar is the kubelet's side of device-plugin
// registration through its plugin watcher, and nothing else: an emulation,
// named as such, for where a device plugin can run but a kubelet cannot
// (the Soft-RoCE VM of hack/verbs-vm has the kernel RDMA subsystem the RDMA
// shared device plugin needs, and no container runtime). Like the kubelet
// it watches the plugins_registry directory for sockets; for each it asks
// GetInfo (k8s.io/kubelet pluginregistration v1), confirms the registration
// of a DevicePlugin, then dials the plugin's endpoint, asks its options and
// reads its first ListAndWatch answer (deviceplugin v1beta1), as the
// kubelet's device manager does, and prints one line per resource:
//
//	registered rdma/hca_numa0 devices=0 healthy=0 endpoint=/var/lib/kubelet/plugins_registry/hca_numa0.sock
//
// It exits 0 once every resource named by --want has registered and listed
// its devices, 1 at --timeout naming those that did not.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

func main() {
	dir := flag.String("registry-dir", "/var/lib/kubelet/plugins_registry", "the kubelet's plugin registry directory")
	want := flag.String("want", "", "comma-separated resource names that must register (required)")
	timeout := flag.Duration("timeout", 60*time.Second, "how long to wait for them")
	flag.Parse()
	if *want == "" {
		fmt.Fprintln(os.Stderr, "kubelet-registrar: give --want RESOURCE[,RESOURCE...]")
		os.Exit(2)
	}
	missing := map[string]bool{}
	for _, name := range strings.Split(*want, ",") {
		missing[strings.TrimSpace(name)] = true
	}
	fmt.Printf("kubelet-registrar: watching %s for %s (at most %s)\n", *dir, *want, *timeout)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	tried := map[string]bool{}
	for len(missing) > 0 {
		sockets, _ := filepath.Glob(filepath.Join(*dir, "*.sock"))
		for _, socket := range sockets {
			if tried[socket] {
				continue
			}
			tried[socket] = true
			name, line, err := register(ctx, socket)
			if err != nil {
				fmt.Fprintf(os.Stderr, "kubelet-registrar: %s: %v\n", socket, err)
				continue
			}
			fmt.Println(line)
			delete(missing, name)
		}
		select {
		case <-ctx.Done():
			var names []string
			for name := range missing {
				names = append(names, name)
			}
			fmt.Fprintf(os.Stderr, "kubelet-registrar: after %s, not registered and listed: %s\n", *timeout, strings.Join(names, ", "))
			os.Exit(1)
		case <-time.After(100 * time.Millisecond): // the kubelet's watcher uses inotify; a poll finds the same sockets
		}
	}
}

// register does what the kubelet does with a new socket in the registry:
// GetInfo, NotifyRegistrationStatus, then the device plugin's options and
// its first device list.
func register(ctx context.Context, socket string) (resource, line string, err error) {
	conn, err := dial(socket)
	if err != nil {
		return "", "", err
	}
	defer conn.Close()
	registration := registerapi.NewRegistrationClient(conn)
	info, err := registration.GetInfo(ctx, &registerapi.InfoRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return "", "", fmt.Errorf("GetInfo: %w", err)
	}
	if info.Type != registerapi.DevicePlugin {
		return "", "", fmt.Errorf("plugin type %q, this registrar takes %q only", info.Type, registerapi.DevicePlugin)
	}
	if !supports(info.SupportedVersions, pluginapi.Version) {
		_, _ = registration.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{Error: "no supported version"})
		return "", "", fmt.Errorf("plugin %s speaks %v, not %s", info.Name, info.SupportedVersions, pluginapi.Version)
	}
	if _, err := registration.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		return "", "", fmt.Errorf("NotifyRegistrationStatus: %w", err)
	}

	endpoint, err := dial(info.Endpoint)
	if err != nil {
		return "", "", err
	}
	defer endpoint.Close()
	plugin := pluginapi.NewDevicePluginClient(endpoint)
	if _, err := plugin.GetDevicePluginOptions(ctx, &pluginapi.Empty{}, grpc.WaitForReady(true)); err != nil {
		return "", "", fmt.Errorf("%s: GetDevicePluginOptions: %w", info.Name, err)
	}
	stream, err := plugin.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		return "", "", fmt.Errorf("%s: ListAndWatch: %w", info.Name, err)
	}
	first, err := stream.Recv()
	if err != nil {
		return "", "", fmt.Errorf("%s: ListAndWatch: %w", info.Name, err)
	}
	healthy := 0
	for _, d := range first.Devices {
		if d.Health == pluginapi.Healthy {
			healthy++
		}
	}
	return info.Name, fmt.Sprintf("registered %s devices=%d healthy=%d endpoint=%s", info.Name, len(first.Devices), healthy, info.Endpoint), nil
}

func dial(socket string) (*grpc.ClientConn, error) {
	return grpc.Dial("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

func supports(versions []string, want string) bool {
	for _, v := range versions {
		if v == want {
			return true
		}
	}
	return false
}
