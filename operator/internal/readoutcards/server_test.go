package readoutcards

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// kubelet plays the kubelet's registration service on a real unix socket.
type kubelet struct {
	pluginapi.UnimplementedRegistrationServer
	mu       sync.Mutex
	requests []*pluginapi.RegisterRequest
}

func (k *kubelet) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.requests = append(k.requests, r)
	return &pluginapi.Empty{}, nil
}

func (k *kubelet) registered() []*pluginapi.RegisterRequest {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]*pluginapi.RegisterRequest(nil), k.requests...)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// The plugin registers each NUMA node's resource with the kubelet, serves
// its devices and allocations over the kubelet's gRPC API, and registers
// again after the kubelet restarted (which removes the plugins' sockets).
func TestPluginServesTheKubeletOverItsSockets(t *testing.T) {
	dir, err := os.MkdirTemp("", "rc") // short: unix socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	lis, err := net.Listen("unix", filepath.Join(dir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	k := &kubelet{}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, k)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	// The host's /dev as the plugin sees it: card tell40-1 is there.
	devRoot := filepath.Join(dir, "host")
	if err := os.MkdirAll(filepath.Join(devRoot, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	card := filepath.Join(devRoot, "dev", "pcie40_1")
	if err := os.WriteFile(card, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := farm(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- Run(ctx, Options{Dir: dir, Prefix: cfg.ResourcePrefix, Node: cfg.Nodes["eb0"], CheckEvery: 20 * time.Millisecond, DevRoot: devRoot, Log: logr.Discard()})
	}()
	eventually(t, "both resources registered", func() bool { return len(k.registered()) == 2 })
	reqs := k.registered()
	if reqs[0].ResourceName != "daq.io/tell40-numa0" || reqs[1].ResourceName != "daq.io/tell40-numa1" ||
		reqs[0].Version != pluginapi.Version || reqs[1].Endpoint != "eventbuilder-readout-numa1.sock" {
		t.Fatalf("registrations %v", reqs)
	}

	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, reqs[1].Endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pluginapi.NewDevicePluginClient(conn)
	watch, err := client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := watch.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Devices) != 3 || first.Devices[0].ID != "tell40-1.ut2" || first.Devices[0].Topology.Nodes[0].ID != 1 ||
		first.Devices[0].Health != pluginapi.Healthy || first.Devices[2].Health != pluginapi.Unhealthy {
		t.Errorf("devices %v: want NUMA node 1's three streams, tell40-1's healthy, tell40-2's not (no /dev/pcie40_2)", first.Devices)
	}
	// The card goes away: the kubelet hears of it.
	if err := os.Remove(card); err != nil {
		t.Fatal(err)
	}
	next, err := watch.Recv()
	if err != nil || next.Devices[0].Health != pluginapi.Unhealthy {
		t.Errorf("after the card's device node went: %v, %v; want tell40-1's streams unhealthy", next, err)
	}
	alloc, err := client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"tell40-1.ut3"}}}})
	if err != nil || alloc.ContainerResponses[0].Envs[EnvStreams] != "ut3" || alloc.ContainerResponses[0].Devices[0].HostPath != "/dev/pcie40_1" {
		t.Errorf("allocate: %v, %v", alloc, err)
	}
	if _, err := client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"nonsense"}}}}); err == nil {
		t.Errorf("allocating an unknown device succeeded")
	}

	// The kubelet restarts: its sockets directory is emptied.
	if err := os.Remove(filepath.Join(dir, reqs[0].Endpoint)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "registration again", func() bool { return len(k.registered()) == 4 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
