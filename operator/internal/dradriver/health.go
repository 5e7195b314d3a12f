package dradriver

import (
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	resourceapi "k8s.io/api/resource/v1"
	drahealth "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"

	"daq.io/eventbuilder/operator/internal/dradevices"
)

// health is the devices' health as the kubelet takes it, stamped now; the
// kubelet takes a device's health as unknown once timeout passes without
// word of it.
func (d *Driver) health(devices []resourceapi.Device, now time.Time) *drahealth.NodeWatchResourcesResponse {
	exists := func(path string) bool {
		_, err := os.Stat(filepath.Join(d.DevRoot, path))
		return err == nil
	}
	out := &drahealth.NodeWatchResourcesResponse{}
	for _, dev := range devices {
		status := drahealth.HealthStatus_UNHEALTHY
		if dradevices.Healthy(dev, exists) {
			status = drahealth.HealthStatus_HEALTHY
		}
		out.Devices = append(out.Devices, &drahealth.DeviceHealth{
			Device:                    &drahealth.DeviceIdentifier{PoolName: d.Node, DeviceName: dev.Name},
			Health:                    status,
			LastUpdatedTime:           now.Unix(),
			HealthCheckTimeoutSeconds: int64(d.HealthTimeout / time.Second),
		})
	}
	return out
}

// NodeWatchResources streams the health of the node's devices to the
// kubelet (its DRAResourceHealth service, which shows it in the pods'
// allocatedResourcesStatus where its ResourceHealthStatus feature is on):
// at once, then after each discovery (Resources), until the kubelet hangs
// up. A watcher too slow for one discovery gets the next.
func (d *Driver) NodeWatchResources(_ *drahealth.NodeWatchResourcesRequest, stream grpc.ServerStreamingServer[drahealth.NodeWatchResourcesResponse]) error {
	updates := make(chan *drahealth.NodeWatchResourcesResponse, 1)
	d.mu.Lock()
	if d.watchers == nil {
		d.watchers = map[chan *drahealth.NodeWatchResourcesResponse]bool{}
	}
	d.watchers[updates] = true
	current := d.health(d.devices, time.Now())
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.watchers, updates)
		d.mu.Unlock()
	}()
	for {
		if err := stream.Send(current); err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			return nil
		case current = <-updates:
		}
	}
}

// tellWatchers hands each watcher the health after a discovery, in place
// of one it has not taken yet. d.mu is held.
func (d *Driver) tellWatchers(devices []resourceapi.Device) {
	if len(d.watchers) == 0 {
		return
	}
	h := d.health(devices, time.Now())
	for w := range d.watchers {
		select {
		case <-w:
		default:
		}
		w <- h
	}
}
