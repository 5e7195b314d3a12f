package builderpod

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/testenv"
)

// builderFlag is one entry of eb-builder --describe-flags: the builder's
// flag table (builder/src/app/flags.cpp), the one place each flag is named,
// ranged and defaulted.
type builderFlag struct {
	Name        string   `json:"name"`
	Default     string   `json:"default"`
	Environment string   `json:"environment"`
	Min         *uint64  `json:"min"`
	Max         *uint64  `json:"max"`
	Choices     []string `json:"choices"`
}

// builderFlags runs $EB_BUILDER --describe-flags.
func builderFlags(t *testing.T) map[string]builderFlag {
	t.Helper()
	bin := os.Getenv("EB_BUILDER")
	if bin == "" {
		testenv.Unavailable(t, "EB_BUILDER is not set: no eb-builder to describe its flags (make test-operator builds one and sets it)")
	}
	out, err := exec.Command(bin, "--describe-flags").Output()
	if err != nil {
		t.Fatalf("EB_BUILDER=%s --describe-flags: %v", bin, err)
	}
	var described struct {
		Flags []builderFlag `json:"flags"`
	}
	if err := json.Unmarshal(out, &described); err != nil {
		t.Fatalf("eb-builder --describe-flags: %v", err)
	}
	flags := map[string]builderFlag{}
	for _, flag := range described.Flags {
		flags[flag.Name] = flag
	}
	return flags
}

// crdField is where a CR field sits in the CRD's schema, and the flag it
// becomes: a number (scaled: a duration in the flag's unit) or a choice.
type crdField struct {
	path []string // under spec
	flag string
	unit time.Duration // a duration field: the flag's unit; else 0
}

// The fields Args passes its own way; the tuned ones (tagged ebflag) come
// from the type (tunedFields).
var crdFields = []crdField{
	{path: []string{"builder", "packingFactor"}, flag: "--packing-factor"},
	{path: []string{"builder", "source", "generator", "fragmentSize"}, flag: "--fragment-size"},
	{path: []string{"builder", "output", "shm", "ringMiB"}, flag: "--ring-mib"},
	{path: []string{"builder", "transport"}, flag: "--transport"},
	{path: []string{"builder", "incompleteEvents"}, flag: "--incomplete"},
}

// tunedFields are BuilderSpec's fields tagged ebflag, which TunedArgs
// passes: each a pointer to a count or a duration.
func tunedFields(t *testing.T) []crdField {
	t.Helper()
	var fields []crdField
	spec := reflect.TypeOf(ebv1.BuilderSpec{})
	for i := range spec.NumField() {
		field := spec.Field(i)
		flag := field.Tag.Get("ebflag")
		if flag == "" {
			continue
		}
		name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
		tuned := crdField{path: []string{"builder", name}, flag: flag}
		switch field.Type {
		case reflect.TypeOf((*metav1.Duration)(nil)):
			if !strings.HasSuffix(flag, "-ms") && !strings.HasSuffix(flag, "-us") {
				t.Errorf("BuilderSpec.%s: a duration passed as %s, which names no unit (-ms or -us)", field.Name, flag)
			}
			tuned.unit = FlagUnit(flag)
		case reflect.TypeOf((*int32)(nil)):
		default:
			t.Errorf("BuilderSpec.%s: ebflag on a %v; TunedArgs passes *int32 and *metav1.Duration", field.Name, field.Type)
		}
		fields = append(fields, tuned)
	}
	if len(fields) < 5 {
		t.Errorf("BuilderSpec has %d fields tagged ebflag; want peerTimeout, joinTimeout, busyPoll, dataThreads, tcpStreams at least", len(fields))
	}
	return fields
}

// A duration field's range, from its CEL rule.
var durationRange = regexp.MustCompile(`duration\(self\) >= duration\('([^']+)'\) && duration\(self\) <= duration\('([^']+)'\)`)

// specSchema is the EventBuilderRun CRD's schema of spec, as generated.
func specSchema(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("../../../config/crd/bases/eventbuilder.daq.io_eventbuilderruns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	schema := dig(t, crd, "spec", "versions")
	version := schema.([]any)[0].(map[string]any)
	return dig(t, version, "schema", "openAPIV3Schema", "properties", "spec").(map[string]any)
}

func dig(t *testing.T, node any, keys ...string) any {
	t.Helper()
	for _, key := range keys {
		object, ok := node.(map[string]any)
		if !ok || object[key] == nil {
			t.Fatalf("CRD schema: no %q in %v", key, keys)
		}
		node = object[key]
	}
	return node
}

// The CRD refuses what the builder would refuse: each field's range lies
// within its flag's, its choices are the flag's, and its default is the
// flag's. A field left unbounded is bounded by its Go type (int32), which
// the flag's range must then hold.
func TestCRDRangesAndDefaultsAreTheBuilderFlags(t *testing.T) {
	flags := builderFlags(t)
	spec := specSchema(t)
	for _, field := range append(crdFields, tunedFields(t)...) {
		name := "spec." + strings.Join(field.path, ".")
		flag, ok := flags[field.flag]
		if !ok {
			t.Errorf("%s: eb-builder has no flag %s", name, field.flag)
			continue
		}
		keys := []string{}
		for _, step := range field.path {
			keys = append(keys, "properties", step)
		}
		schema := dig(t, spec, keys...).(map[string]any)
		switch {
		case len(flag.Choices) > 0:
			var values []string
			for _, value := range schema["enum"].([]any) {
				values = append(values, strings.ToLower(value.(string)))
			}
			if fmt.Sprint(values) != fmt.Sprint(flag.Choices) {
				t.Errorf("%s takes %v, %s %v", name, values, field.flag, flag.Choices)
			}
		case field.unit != 0:
			low, high := durationBounds(t, name, schema)
			if uint64(low/field.unit) < *flag.Min || uint64(high/field.unit) > *flag.Max {
				t.Errorf("%s takes %v..%v, %s %d..%d (x %v)", name, low, high, field.flag, *flag.Min, *flag.Max, field.unit)
			}
		default:
			low, high := float64(math.MinInt32), float64(math.MaxInt32)
			if minimum, ok := schema["minimum"].(float64); ok {
				low = minimum
			}
			if maximum, ok := schema["maximum"].(float64); ok {
				high = maximum
			}
			if low < float64(*flag.Min) || high > float64(*flag.Max) {
				t.Errorf("%s takes %.0f..%.0f, %s %d..%d: set its +kubebuilder:validation:Minimum/Maximum within the flag's",
					name, low, high, field.flag, *flag.Min, *flag.Max)
			}
		}
		if value, ok := schema["default"]; ok && strings.ToLower(fmt.Sprint(value)) != flag.Default {
			t.Errorf("%s defaults to %v, %s to %q", name, value, field.flag, flag.Default)
		}
	}
}

func durationBounds(t *testing.T, name string, schema map[string]any) (time.Duration, time.Duration) {
	t.Helper()
	for _, rule := range schema["x-kubernetes-validations"].([]any) {
		match := durationRange.FindStringSubmatch(rule.(map[string]any)["rule"].(string))
		if match == nil {
			continue
		}
		low, errLow := time.ParseDuration(match[1])
		high, errHigh := time.ParseDuration(match[2])
		if errLow != nil || errHigh != nil {
			t.Fatalf("%s: range %q..%q", name, match[1], match[2])
		}
		return low, high
	}
	t.Fatalf("%s: no duration range among its validation rules", name)
	return 0, 0
}

// Every flag a pod's command line carries is one eb-builder has, with a
// value in its range or among its choices, for a run with every builder
// setting away from its default, over TCP and over verbs; and the
// variables the builder reads in place of a flag are the ones the pod sets.
func TestPodCommandLinesAreBuilderFlagsInRange(t *testing.T) {
	flags := builderFlags(t)
	tcp := testRun("demo", 2)
	b := &tcp.Spec.Builder
	b.Source = &ebv1.SourceSpec{Generator: &ebv1.GeneratorSource{FragmentSize: 64}}
	b.Output = &ebv1.OutputSpec{Shm: &ebv1.ShmOutput{RingMiB: 256, Consumer: ebv1.SideContainer{Image: "consumer:1"}}}
	b.IncompleteEvents = ebv1.IncompleteFlag
	b.PeerTimeout = &metav1.Duration{Duration: 60 * time.Second}
	b.JoinTimeout = &metav1.Duration{Duration: 300 * time.Second}
	b.BusyPoll = &metav1.Duration{Duration: 10 * time.Millisecond}
	b.DataThreads = ptr.To(int32(64))
	b.TCPStreams = ptr.To(int32(16))
	verbs := tcp.DeepCopy()
	verbs.Spec.Builder.Transport = ebv1.TransportVerbs
	verbs.Spec.Builder.TCPStreams = nil
	verbs.Spec.Builder.ReceiveWindow = ptr.To(int32(1000000))
	verbs.Spec.Builder.Output = &ebv1.OutputSpec{Discard: &ebv1.DiscardOutput{}}

	for name, args := range map[string][]string{
		"tcp":   Args(tcp, 1, nil),
		"verbs": Args(verbs, 1, &Placement{RDMADevice: "mlx5_0"}),
	} {
		seen := map[string]bool{}
		for i := 0; i < len(args); i += 2 {
			flag, ok := flags[args[i]]
			if !ok || i+1 == len(args) {
				t.Errorf("%s: %q is no eb-builder flag with a value (args %q)", name, args[i], args)
				continue
			}
			seen[args[i]] = true
			value := args[i+1]
			switch {
			case len(flag.Choices) > 0:
				if !contains(flag.Choices, value) {
					t.Errorf("%s: %s %s, not one of %v", name, args[i], value, flag.Choices)
				}
			case flag.Min != nil:
				number, err := strconv.ParseUint(value, 10, 64)
				if err != nil || number < *flag.Min || number > *flag.Max {
					t.Errorf("%s: %s %s, not a whole number in %d..%d", name, args[i], value, *flag.Min, *flag.Max)
				}
			}
		}
		want := []string{"--packing-factor", "--output", "--incomplete"}
		// Each transport's own: tcpStreams over TCP, receiveWindow over verbs.
		only := map[string]string{"--tcp-streams": "tcp", "--receive-window": "verbs"}
		for _, field := range tunedFields(t) {
			if transport, ok := only[field.flag]; !ok || transport == name {
				want = append(want, field.flag)
			}
		}
		for _, want := range want {
			if !seen[want] {
				t.Errorf("%s: args %q lack %s: the check above saw less than the run sets", name, args, want)
			}
		}
	}

	read := map[string]bool{}
	for _, flag := range flags {
		if flag.Environment != "" {
			read[flag.Environment] = true
		}
	}
	for _, env := range []string{EnvNUMANode, EnvRDMADevice} {
		if !read[env] {
			t.Errorf("the pod sets %s for eb-builder, which reads no such variable (its flags read %v)", env, read)
		}
	}
	// The pod gives a placed builder its NUMA node and device by name.
	pod := Pod(tcp, 1, &Placement{Endpoint: "e0", Node: "n0", NUMA: 1, RDMADevice: "mlx5_0"}, "uid")
	given := map[string]bool{}
	for _, container := range pod.Spec.Containers {
		if container.Name == ContainerName {
			for _, env := range container.Env {
				given[env.Name] = true
			}
		}
	}
	for _, env := range []string{EnvNUMANode, EnvRDMADevice} {
		if !given[env] {
			t.Errorf("a placed builder's pod lacks %s (it has %v)", env, given)
		}
	}
}

func contains(values []string, value string) bool {
	for _, v := range values {
		if v == value {
			return true
		}
	}
	return false
}
