// Package dradriver is the event builder's DRA kubelet plugin
// (cmd/eventbuilder-dra) without its process plumbing: it publishes what
// dradevices finds on its node as one pool named after the node, prepares
// a claim by writing its CDI spec (dradevices.ClaimSpec) where the
// container runtime reads them, unprepares it by removing the spec, and
// streams the devices' health to the kubelet.
// k8s.io/dynamic-resource-allocation/kubeletplugin serves the kubelet's
// gRPC calls and publishes the ResourceSlices.
package dradriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	drahealth "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"

	"daq.io/eventbuilder/operator/internal/dradevices"
	"daq.io/eventbuilder/operator/internal/readoutcards"
)

// DriverName is the driver's name: DeviceClasses select its devices by it,
// and its unqualified attributes are in its domain.
const DriverName = "eventbuilder.daq.io"

// Driver implements kubeletplugin.DRAPlugin for one node.
type Driver struct {
	Node   string                  // the node's name, and its pool's
	Sys    string                  // the sysfs root to discover from (/sys; an emulated tree on kind)
	CDIDir string                  // where the container runtime reads CDI specs (/var/run/cdi)
	Cards  readoutcards.NodeConfig // the node's readout cards
	// DevRoot is where the node's /dev is seen ("" or "/": here), for the
	// cards' device nodes whose presence is their streams' health.
	DevRoot string
	// HealthTimeout is how long the kubelet takes a device's health for
	// known without word of it: longer than between two discoveries.
	HealthTimeout time.Duration
	// Fail ends the plugin on a background error that retrying cannot
	// mend; nil: such errors are only logged.
	Fail func(error)

	drahealth.UnimplementedDRAResourceHealthServer

	mu       sync.Mutex
	devices  []resourceapi.Device // as last discovered
	verbs    map[string]string
	watchers map[chan *drahealth.NodeWatchResourcesResponse]bool // the kubelet's health streams
}

// Resources discovers the node's devices and returns them as the driver's
// one pool, for kubeletplugin.Helper.PublishResources.
func (d *Driver) Resources() (resourceslice.DriverResources, error) {
	devices, err := dradevices.Discover(d.Sys, d.Cards)
	if err != nil {
		return resourceslice.DriverResources{}, err
	}
	verbs, err := dradevices.VerbsNodes(d.Sys)
	if err != nil {
		return resourceslice.DriverResources{}, err
	}
	d.mu.Lock()
	d.devices, d.verbs = devices, verbs
	d.tellWatchers(devices)
	d.mu.Unlock()
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		d.Node: {Slices: []resourceslice.Slice{{Devices: devices}}},
	}}, nil
}

// PrepareResourceClaims writes each claim's CDI spec: one CDI device with
// everything allocated to the claim on this node, named by every device
// of it (the container runtime applies one device's edits once).
func (d *Driver) PrepareResourceClaims(_ context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	d.mu.Lock()
	devices, verbs := d.devices, d.verbs
	d.mu.Unlock()
	results := map[types.UID]kubeletplugin.PrepareResult{}
	for _, claim := range claims {
		var names, requests []string
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver == DriverName && r.Pool == d.Node {
				names, requests = append(names, r.Device), append(requests, r.Request)
			}
		}
		spec, err := dradevices.ClaimSpec(string(claim.UID), names, devices, verbs)
		if err == nil {
			err = d.writeSpec(claim.UID, spec)
		}
		if err != nil {
			results[claim.UID] = kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s: %w", claim.Namespace, claim.Name, err)}
			continue
		}
		result := kubeletplugin.PrepareResult{}
		for i, name := range names {
			result.Devices = append(result.Devices, kubeletplugin.Device{Requests: []string{requests[i]}, PoolName: d.Node,
				DeviceName: name, CDIDeviceIDs: []string{dradevices.CDIDeviceID(string(claim.UID))}})
		}
		results[claim.UID] = result
	}
	return results, nil
}

// UnprepareResourceClaims removes the claims' CDI specs; one already gone
// is no error (the kubelet may ask again).
func (d *Driver) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	results := map[types.UID]error{}
	for _, claim := range claims {
		err := os.Remove(d.specPath(claim.UID))
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
		results[claim.UID] = err
	}
	return results, nil
}

// HandleError logs a background error (publishing ResourceSlices) and
// ends the plugin on one that retrying cannot mend.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	runtime.HandleErrorWithContext(ctx, err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) && d.Fail != nil {
		d.Fail(fmt.Errorf("%s: %w", msg, err))
	}
}

func (d *Driver) specPath(claim types.UID) string {
	return filepath.Join(d.CDIDir, "eventbuilder.daq.io-claim_"+string(claim)+".json")
}

// writeSpec writes the spec whole or not at all: a runtime that reads the
// directory meanwhile never sees half a file.
func (d *Driver) writeSpec(claim types.UID, spec any) error {
	body, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d.CDIDir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(d.CDIDir, ".claim-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(body); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), d.specPath(claim))
}
