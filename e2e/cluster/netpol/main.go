// Command netpol enforces the ingress rules of Kubernetes NetworkPolicies
// on one node of the kind test cluster, with nftables. It stands in for
// kube-network-policies, which needs nft's queue expression, absent from
// this host's kernel ("add rule ... queue num 98": No such file or
// directory). A test-cluster emulation, named as such: ingress only, IPv4,
// the full ruleset rewritten atomically on every change (fine for tens of
// pods, not for a farm, whose CNI enforces policies itself).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

func main() {
	node := flag.String("node", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME)")
	flag.Parse()
	if *node == "" {
		log.Fatal("netpol: give --node or $NODE_NAME")
	}
	config, err := rest.InClusterConfig()
	if err != nil {
		log.Fatalf("netpol: %v", err)
	}
	clients := kubernetes.NewForConfigOrDie(config)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	factory := informers.NewSharedInformerFactory(clients, 0)
	pods, namespaces, policies := factory.Core().V1().Pods(), factory.Core().V1().Namespaces(), factory.Networking().V1().NetworkPolicies()
	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, o any) { poke(o) }, DeleteFunc: poke}
	for _, informer := range []cache.SharedIndexInformer{pods.Informer(), namespaces.Informer(), policies.Informer()} {
		if _, err := informer.AddEventHandler(handler); err != nil {
			log.Fatalf("netpol: %v", err)
		}
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	log.Printf("netpol: enforcing NetworkPolicy ingress rules on node %s (table inet %s)", *node, table)

	last := ""
	for {
		select {
		case <-ctx.Done():
			// Leave the node open rather than isolated by stale rules.
			_ = exec.Command("nft", "delete", "table", "inet", table).Run()
			return
		case <-changed:
		}
		var c Cluster
		podList, _ := pods.Lister().List(labels.Everything())
		for _, p := range podList {
			c.Pods = append(c.Pods, *p)
		}
		nsList, _ := namespaces.Lister().List(labels.Everything())
		for _, n := range nsList {
			c.Namespaces = append(c.Namespaces, *n)
		}
		policyList, _ := policies.Lister().List(labels.Everything())
		for _, p := range policyList {
			c.Policies = append(c.Policies, *p)
		}
		script := Ruleset(*node, c)
		if script == last {
			continue
		}
		if err := apply(script); err != nil {
			log.Printf("netpol: %v; retrying in 1 s", err)
			time.AfterFunc(time.Second, func() { poke(nil) })
			continue
		}
		last = script
		log.Printf("netpol: ruleset applied: %d pods isolated", strings.Count(script, " jump pod"))
	}
}

// apply loads script with nft, atomically.
func apply(script string) error {
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft -f: %v: %s", err, out)
	}
	return nil
}
