package readoutcards

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Options of a node's plugin.
type Options struct {
	// Dir holds the kubelet's registration socket (kubelet.sock) and the
	// plugin's own sockets: /var/lib/kubelet/device-plugins on a node.
	Dir string
	// Prefix and Node: the resources' prefix and this node's cards.
	Prefix string
	Node   NodeConfig
	// CheckEvery is how often device health and the sockets are looked at.
	CheckEvery time.Duration
	// DevRoot is where the host's device nodes are seen from the plugin
	// ("" on the host; /host when the host's /dev is mounted at /host/dev).
	DevRoot string
	// MachineNUMA are the machine's NUMA nodes (nil: unknown): cards said
	// to be on another go without topology, with a warning.
	MachineNUMA []int
	Log         logr.Logger
}

// Run serves the node's resources to the kubelet until ctx ends: one gRPC
// server per resource on a socket in Dir, registered with the kubelet.
// The kubelet removes every plugin socket when it restarts; then the
// plugin serves and registers again. A kubelet that does not answer is
// retried every CheckEvery.
func Run(ctx context.Context, o Options) error {
	resources := Resources(o.Prefix, o.Node)
	for _, r := range MarkUnaligned(resources, o.MachineNUMA) {
		o.Log.Info("WARNING: the configuration puts cards on a NUMA node this machine does not have: their streams are advertised "+
			"without topology, so the Topology Manager cannot align them; correct the cards' numa in the configuration",
			"resource", r.Name, "numa", r.NUMA, "machineNUMANodes", o.MachineNUMA)
	}
	if len(resources) == 0 {
		o.Log.Info("no readout cards on this node: nothing to advertise")
		<-ctx.Done()
		return nil
	}
	for ctx.Err() == nil {
		servers, err := serve(ctx, o, resources)
		if err != nil {
			o.Log.Error(err, "serving and registering the readout resources; retrying", "in", o.CheckEvery)
		} else {
			o.Log.Info("registered with the kubelet", "resources", len(servers))
			waitWhileServed(ctx, o, servers)
			if ctx.Err() == nil {
				o.Log.Info("a plugin socket is gone (the kubelet restarted): serving and registering again")
			}
		}
		for _, s := range servers {
			s.stop()
		}
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(o.CheckEvery):
			}
		}
	}
	return nil
}

type served struct {
	socket string
	grpc   *grpc.Server
	done   chan struct{}
}

func (s served) stop() {
	close(s.done)
	s.grpc.Stop()
	_ = os.Remove(s.socket)
}

// serve starts every resource's server and registers it; on an error the
// servers started so far are returned, to be stopped.
func serve(ctx context.Context, o Options, resources []Resource) ([]served, error) {
	var out []served
	for _, r := range resources {
		socket := filepath.Join(o.Dir, fmt.Sprintf("eventbuilder-readout-numa%d.sock", r.NUMA))
		_ = os.Remove(socket)
		lis, err := net.Listen("unix", socket)
		if err != nil {
			return out, fmt.Errorf("listen on %s: %w", socket, err)
		}
		s := served{socket: socket, grpc: grpc.NewServer(), done: make(chan struct{})}
		pluginapi.RegisterDevicePluginServer(s.grpc, &plugin{res: r, emulated: o.Node.Emulated, every: o.CheckEvery, done: s.done,
			exists: func(path string) bool { _, err := os.Stat(filepath.Join(o.DevRoot, path)); return err == nil }})
		go func() { _ = s.grpc.Serve(lis) }()
		out = append(out, s)
		if err := register(ctx, o.Dir, r.Name, filepath.Base(socket)); err != nil {
			return out, err
		}
	}
	return out, nil
}

func register(ctx context.Context, dir, resource, endpoint string) error {
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("kubelet registration socket: %w", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: endpoint, ResourceName: resource,
		Options: &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true},
	})
	if err != nil {
		return fmt.Errorf("register %s with the kubelet: %w", resource, err)
	}
	return nil
}

// waitWhileServed returns when ctx ends or a socket is gone.
func waitWhileServed(ctx context.Context, o Options, servers []served) {
	tick := time.NewTicker(o.CheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			for _, s := range servers {
				if _, err := os.Stat(s.socket); errors.Is(err, os.ErrNotExist) {
					return
				}
			}
		}
	}
}

// plugin is the kubelet's view of one resource.
type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	res      Resource
	emulated bool
	every    time.Duration
	done     chan struct{}
	exists   func(path string) bool
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}, nil
}

// ListAndWatch sends the devices, then again whenever a health changes.
func (p *plugin) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	health := func(list []*pluginapi.Device) []string {
		var h []string
		for _, d := range list {
			h = append(h, d.Health)
		}
		return h
	}
	list := List(p.res, p.exists)
	if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: list}); err != nil {
		return err
	}
	tick := time.NewTicker(p.every)
	defer tick.Stop()
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case <-p.done:
			return nil
		case <-tick.C:
			next := List(p.res, p.exists)
			if slices.Equal(health(next), health(list)) {
				continue
			}
			list = next
			if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: list}); err != nil {
				return err
			}
		}
	}
}

func (p *plugin) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, c := range req.ContainerRequests {
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{
			DeviceIDs: Preferred(p.res, c.AvailableDeviceIDs, c.MustIncludeDeviceIDs, int(c.AllocationSize)),
		})
	}
	return resp, nil
}

func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		a, err := Allocation(p.res, c.DevicesIds, p.emulated)
		if err != nil {
			return nil, err
		}
		resp.ContainerResponses = append(resp.ContainerResponses, a)
	}
	return resp, nil
}

func (p *plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
