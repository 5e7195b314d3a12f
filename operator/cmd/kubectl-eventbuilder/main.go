// kubectl-eventbuilder is a kubectl plugin for the shift crew: an
// EventBuilderRun in words (status) and its rank table with where each rank
// runs (ranks). On the PATH as kubectl-eventbuilder, kubectl runs it as
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
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/shiftview"
)

const usage = `Usage: kubectl eventbuilder COMMAND RUN [flags]

Commands:
  status RUN   the run in words: phase, units and spares, events and rates,
               its conditions (those asking for attention first), the last
               failover
  ranks RUN    its rank table: role, unit, endpoint, node, leaf/port and
               fibres (from its Fabric), NUMA placement, builder state, pod

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
		return errors.New("name a command: status or ranks")
	}
	command := args[0]
	if command == "-h" || command == "--help" || command == "help" {
		flags.Usage()
		return nil
	}
	if command != "status" && command != "ranks" {
		flags.Usage()
		return fmt.Errorf("unknown command %q: use status or ranks", command)
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
		return fmt.Errorf("%s takes one run name, e.g. kubectl eventbuilder %s sample (got %d)", command, command, len(names))
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
	if err := ebv1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var ebrun ebv1.EventBuilderRun
	if err := c.Get(ctx, types.NamespacedName{Namespace: *namespace, Name: names[0]}, &ebrun); err != nil {
		return fmt.Errorf("run %s/%s: %w", *namespace, names[0], err)
	}
	switch command {
	case "status":
		_, err = io.WriteString(stdout, shiftview.Status(&ebrun, time.Now()))
	case "ranks":
		var fabric *ebv1.Fabric
		if ref := ebrun.Spec.FabricRef; ref != nil {
			fabric = &ebv1.Fabric{}
			if err := c.Get(ctx, types.NamespacedName{Name: ref.Name}, fabric); err != nil {
				return fmt.Errorf("run %s/%s: its Fabric %s: %w", *namespace, names[0], ref.Name, err)
			}
		}
		_, err = io.WriteString(stdout, shiftview.Ranks(&ebrun, fabric))
	}
	return err
}
