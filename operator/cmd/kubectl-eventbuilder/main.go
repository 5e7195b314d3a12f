// kubectl-eventbuilder is a kubectl plugin for the shift crew: an
// EventBuilderRun in words (status), its rank table with where each rank
// runs (ranks), its failovers, why it is not building at full strength
// (why), and a Fabric as a map of leaves and ports (fabric). On the PATH as kubectl-eventbuilder, kubectl runs it as
// `kubectl eventbuilder`. It reads the kubeconfig as kubectl does
// (KUBECONFIG, ~/.kube/config; --kubeconfig, --context, -n); client-go's
// clientcmd does that resolution, so k8s.io/cli-runtime is not needed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/shiftview"
)

var commands = []string{"status", "ranks", "failovers", "why", "fabric"}

const commandList = "status, ranks, failovers, why or fabric"

const usage = `Usage: kubectl eventbuilder COMMAND NAME [flags]

Commands:
  status RUN   the run in words: phase, units and spares, events and rates,
               its conditions (those asking for attention first), the last
               failover
  ranks RUN    its rank table: role, unit, endpoint, node, leaf/port and
               fibres (from its Fabric), NUMA placement, builder state, pod
  failovers RUN  its failovers: the operator's Events, then the last one
               its status records
  why RUN      what keeps it from building at full strength: conditions
               asking for attention, pods not running and the scheduler's
               or the kubelet's reason
  fabric NAME  a Fabric leaf by leaf and port by port: each endpoint's
               server, NUMA node, fibres and the run and rank on it

Flags:
`

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "kubectl-eventbuilder:", err)
		os.Exit(1)
	}
}

// run is the plugin with its arguments; errors name the fix.
func run(args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("kubectl-eventbuilder", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = func() {
		fmt.Fprint(stderr, usage)
		flags.PrintDefaults()
	}
	namespace := flags.String("n", "", "namespace of the run (default: the kubeconfig context's)")
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig file (default: KUBECONFIG, else ~/.kube/config)")
	kubeContext := flags.String("context", "", "kubeconfig context (default: the current one)")
	timeout := flags.Duration("request-timeout", 30*time.Second, "how long to wait for the API server")
	if len(args) == 0 {
		flags.Usage()
		return errors.New("name a command: " + commandList)
	}
	command := args[0]
	if command == "-h" || command == "--help" || command == "help" {
		flags.Usage()
		return nil
	}
	if !slices.Contains(commands, command) {
		flags.Usage()
		return fmt.Errorf("unknown command %q: use %s", command, commandList)
	}
	// The run's name may come before or after the flags.
	var names []string
	rest := args[1:]
	for len(rest) > 0 {
		if err := flags.Parse(rest); err != nil {
			return err
		}
		rest = flags.Args()
		if len(rest) > 0 {
			names = append(names, rest[0])
			rest = rest[1:]
		}
	}
	if len(names) != 1 {
		what := "run"
		if command == "fabric" {
			what = "Fabric"
		}
		return fmt.Errorf("%s takes one %s name, e.g. kubectl eventbuilder %s sample (got %d)", command, what, command, len(names))
	}

	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	loading.ExplicitPath = *kubeconfig
	config := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading,
		&clientcmd.ConfigOverrides{CurrentContext: *kubeContext, Context: clientcmdapi.Context{Namespace: *namespace}})
	restConfig, err := config.ClientConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	if *namespace, _, err = config.Namespace(); err != nil {
		return fmt.Errorf("kubeconfig namespace: %w", err)
	}
	restConfig.Timeout = *timeout
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), ebv1.AddToScheme(scheme)); err != nil {
		return err
	}
	c, err := client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	text, err := show(ctx, c, command, *namespace, names[0])
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, text)
	return err
}

// show reads what command needs and renders it.
func show(ctx context.Context, c client.Client, command, namespace, name string) (string, error) {
	if command == "fabric" {
		var fabric ebv1.Fabric
		if err := c.Get(ctx, types.NamespacedName{Name: name}, &fabric); err != nil {
			return "", fmt.Errorf("Fabric %s: %w", name, err)
		}
		var runs ebv1.EventBuilderRunList
		if err := c.List(ctx, &runs); err != nil {
			return "", fmt.Errorf("runs on Fabric %s: %w", name, err)
		}
		return shiftview.Fabric(&fabric, runs.Items), nil
	}
	var run ebv1.EventBuilderRun
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &run); err != nil {
		return "", fmt.Errorf("run %s/%s: %w", namespace, name, err)
	}
	switch command {
	case "ranks":
		var fabric *ebv1.Fabric
		if ref := run.Spec.FabricRef; ref != nil {
			fabric = &ebv1.Fabric{}
			if err := c.Get(ctx, types.NamespacedName{Name: ref.Name}, fabric); err != nil {
				return "", fmt.Errorf("run %s/%s: its Fabric %s: %w", namespace, name, ref.Name, err)
			}
		}
		return shiftview.Ranks(&run, fabric), nil
	case "failovers":
		var events eventsv1.EventList
		if err := c.List(ctx, &events, client.InNamespace(namespace)); err != nil {
			return "", fmt.Errorf("Events of run %s/%s: %w", namespace, name, err)
		}
		return shiftview.Failovers(&run, events.Items, time.Now()), nil
	case "why":
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels(builderpod.Selector(name))); err != nil {
			return "", fmt.Errorf("pods of run %s/%s: %w", namespace, name, err)
		}
		return shiftview.Why(&run, pods.Items), nil
	default:
		return shiftview.Status(&run, time.Now()), nil
	}
}
