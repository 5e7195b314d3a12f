// Command eb-plan prints the rank table the operator would publish for a
// run on a Fabric, from the same manifests (YAML or JSON) kubectl applies:
// the Fabric validated with the operator's rules, the table planned by the
// operator's planner, and, with -fail-nodes, the tables its failovers
// would publish as those servers are lost (a unit moved to a spare, or
// dropped where none is left). The farm simulator (builder/sim,
// eb-farm-sim) reads its output and never plans on its own.
//
// Usage: eb-plan -fabric FABRIC.yaml -run RUN.yaml [-fail-nodes n1,n2]
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/ranktable"
)

// FabricShape is what a simulator needs of the Fabric beyond the table:
// the switches, their links and the routing rule.
type FabricShape struct {
	Name         string `json:"name"`
	Leaves       int32  `json:"leaves"`
	Spines       int32  `json:"spines"`
	PortsPerLeaf int32  `json:"portsPerLeaf"`
	LinksPerPair int32  `json:"linksPerPair"`
	Routing      string `json:"routing"`
}

// Move is what a failover did with one lost unit.
type Move struct {
	FailedEndpoint string `json:"failedEndpoint"`
	// SpareEndpoint took the unit over; empty when it was dropped.
	SpareEndpoint string `json:"spareEndpoint,omitempty"`
	Dropped       bool   `json:"dropped,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// Output is what eb-plan prints.
type Output struct {
	Fabric FabricShape        `json:"fabric"`
	Table  ranktable.Document `json:"table"`
	Moves  []Move             `json:"moves,omitempty"`
}

func main() {
	fabricFile := flag.String("fabric", "", "the Fabric manifest (YAML or JSON)")
	runFile := flag.String("run", "", "the EventBuilderRun manifest (YAML or JSON)")
	failNodes := flag.String("fail-nodes", "", "comma-separated nodes lost after the start: the failover tables the operator would publish")
	flag.Parse()
	out, err := run(*fabricFile, *runFile, *failNodes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "eb-plan:", err)
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "eb-plan:", err)
		os.Exit(1)
	}
}

func run(fabricFile, runFile, failNodes string) (*Output, error) {
	if fabricFile == "" || runFile == "" {
		return nil, errors.New("-fabric and -run are required: the Fabric and EventBuilderRun manifests")
	}
	var fabric ebv1.Fabric
	if err := readManifest(fabricFile, "Fabric", &fabric); err != nil {
		return nil, err
	}
	var eventBuilderRun ebv1.EventBuilderRun
	if err := readManifest(runFile, "EventBuilderRun", &eventBuilderRun); err != nil {
		return nil, err
	}
	var failed []string
	if failNodes != "" {
		failed = strings.Split(failNodes, ",")
	}
	return Plan(&fabric, &eventBuilderRun, failed)
}

// readManifest decodes one object of kind from file, refusing fields the
// kind does not have.
func readManifest(file, kind string, into runtime.Object) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(data, &meta); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if meta.Kind != kind {
		return fmt.Errorf("%s: kind %q, want %s", file, meta.Kind, kind)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}
