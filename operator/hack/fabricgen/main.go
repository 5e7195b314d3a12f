// Command fabricgen writes the manifests of a farm of the LHCb kind (hack/lhcb)
// with any number of servers: a Fabric and an EventBuilderRun that uses
// every server, the spare servers' endpoints as spares. make sim plans
// them with eb-plan and simulates them with eb-farm-sim.
//
// Usage: fabricgen -servers N [-spare-servers K] [-lhcb] -out DIR
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/hack/lhcb"
)

func main() {
	servers := flag.Int("servers", 0, "servers of a fabric of the LHCb kind (leaves of 10 servers, 10 spines, 2 links per pair)")
	spares := flag.Int("spare-servers", 0, "of them, spare servers (no readout streams; their endpoints are the run's spares)")
	farm := flag.Bool("lhcb", false, "the LHCb cabling itself (163 servers and 4 spare servers on 18 leaves) instead of -servers")
	out := flag.String("out", "", "directory to write fabric.yaml and run.yaml in")
	flag.Parse()
	if err := write(*servers, *spares, *farm, *out); err != nil {
		fmt.Fprintln(os.Stderr, "fabricgen:", err)
		os.Exit(1)
	}
}

func write(servers, spares int, farm bool, out string) error {
	shape := lhcb.Farm
	if !farm {
		if servers < 2 || spares < 0 || spares >= servers {
			return fmt.Errorf("-servers %d -spare-servers %d: give at least 2 servers, fewer spares than servers", servers, spares)
		}
		shape = lhcb.Scaled(servers, spares)
	}
	if out == "" {
		return fmt.Errorf("-out is required")
	}
	name := fmt.Sprintf("farm-%d", shape.Servers())
	fabric, _ := shape.Fabric(name)
	fabric.TypeMeta = metav1.TypeMeta{APIVersion: ebv1.GroupVersion.String(), Kind: "Fabric"}
	run := &ebv1.EventBuilderRun{
		TypeMeta:   metav1.TypeMeta{APIVersion: ebv1.GroupVersion.String(), Kind: "EventBuilderRun"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: ebv1.EventBuilderRunSpec{Units: shape.Units(), Spares: shape.Spares(), FabricRef: &ebv1.FabricReference{Name: name},
			Builder: ebv1.BuilderSpec{Image: "eventbuilder/builder:sim"}},
	}
	for file, obj := range map[string]any{"fabric.yaml": fabric, "run.yaml": run} {
		data, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, file), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
