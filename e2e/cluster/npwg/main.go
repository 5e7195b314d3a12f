// Command npwg-emulation is a CNI plugin that gives the kind test cluster
// the Network Plumbing Working Group's multi-network interface, as Multus
// does on a farm (Multus cannot be had on this project's test machines:
// operator/README.md, the data network of a run, e2e/data_network_test.go).
// A test-cluster emulation, named as such. Chained after the pod network's
// plugins, it reads the pod's k8s.v1.cni.cncf.io/networks annotation
// (passed by the container runtime, capability
// io.kubernetes.cri.pod-annotations), fetches each NetworkAttachmentDefinition,
// runs the CNI plugin its spec.config names (macvlan, whereabouts: real
// plugins) with the interface asked for, and writes the
// k8s.v1.cni.cncf.io/network-status annotation before the pod's containers
// start. Unlike Multus it is not the pod network's plugin itself and does
// not pass device IDs of a definition's resourceName to the delegate (no
// device plugin on kind has devices to pass).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// apiDeadline bounds each command's calls to the API server and delegates:
// the kubelet retries a sandbox whose network setup failed.
const apiDeadline = 60 * time.Second

var definitions = schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"}

// pluginConf is this plugin's entry in the node's conflist.
type pluginConf struct {
	cnitypes.NetConf
	// Kubeconfig gives the API server and the credentials (the podnet
	// DaemonSet writes it).
	Kubeconfig string `json:"kubeconfig"`
	// CacheDir keeps, per sandbox, what was attached, for DEL.
	CacheDir      string `json:"cacheDir"`
	RuntimeConfig struct {
		PodAnnotations map[string]string `json:"io.kubernetes.cri.pod-annotations"`
	} `json:"runtimeConfig"`
}

type podArgs struct {
	cnitypes.CommonArgs
	K8S_POD_NAMESPACE          cnitypes.UnmarshallableString //nolint:revive // CNI_ARGS names
	K8S_POD_NAME               cnitypes.UnmarshallableString //nolint:revive
	K8S_POD_INFRA_CONTAINER_ID cnitypes.UnmarshallableString //nolint:revive
}

// attachment is one delegate's configuration, as run on ADD and cached for DEL.
type attachment struct {
	Type      string          `json:"type"`
	Interface string          `json:"interface"`
	Conf      json.RawMessage `json:"conf"`
}

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{Add: add, Del: del, Check: check}, version.All,
		"npwg-emulation: the NPWG multi-network annotations on the kind test cluster (an emulation of Multus)")
}

func add(args *skel.CmdArgs) error {
	conf, err := load(args.StdinData)
	if err != nil {
		return err
	}
	if conf.PrevResult == nil {
		return errors.New("npwg-emulation is a chained plugin: list it after the pod network's plugins in the conflist")
	}
	networks := conf.RuntimeConfig.PodAnnotations[networksAnnotation]
	if networks == "" {
		return cnitypes.PrintResult(conf.PrevResult, conf.CNIVersion)
	}
	var pod podArgs
	if err := cnitypes.LoadArgs(args.Args, &pod); err != nil {
		return err
	}
	namespace, name := string(pod.K8S_POD_NAMESPACE), string(pod.K8S_POD_NAME)
	selections, err := parseSelections(networks, namespace)
	if err != nil {
		return fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	restConfig, err := clientcmd.BuildConfigFromFlags("", conf.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", conf.Kubeconfig, err)
	}
	definitionsClient, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiDeadline)
	defer cancel()

	defaultStatus, err := statusOf(conf.Name, args.IfName, conf.PrevResult, true)
	if err != nil {
		return err
	}
	statuses := []networkStatus{defaultStatus}
	cache := cachePath(conf, args)
	var attached []attachment
	for _, s := range selections {
		status, err := attach(ctx, definitionsClient, s, cache, &attached)
		if err != nil {
			if undoErr := detach(ctx, attached); undoErr != nil {
				err = fmt.Errorf("%w (and undoing the networks attached before: %v)", err, undoErr)
			} else {
				_ = os.Remove(cache)
			}
			return fmt.Errorf("pod %s/%s: %w", namespace, name, err)
		}
		statuses = append(statuses, status)
	}
	if err := publish(ctx, restConfig, namespace, name, statuses); err != nil {
		return fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	return cnitypes.PrintResult(conf.PrevResult, conf.CNIVersion)
}

// attach runs one selection's delegate as interface s.Interface, recording
// it in the cache first, so that a DEL after a half-done ADD undoes it.
func attach(ctx context.Context, client dynamic.Interface, s selection, cache string, attached *[]attachment) (networkStatus, error) {
	definition, err := client.Resource(definitions).Namespace(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	if err != nil {
		return networkStatus{}, fmt.Errorf("NetworkAttachmentDefinition %s/%s: %w", s.Namespace, s.Name, err)
	}
	config, _, _ := unstructured.NestedString(definition.Object, "spec", "config")
	pluginType, conf, err := delegateConfig(config, s)
	if err != nil {
		return networkStatus{}, err
	}
	*attached = append(*attached, attachment{Type: pluginType, Interface: s.Interface, Conf: conf})
	if err := save(cache, *attached); err != nil {
		return networkStatus{}, err
	}
	if err := os.Setenv("CNI_IFNAME", s.Interface); err != nil {
		return networkStatus{}, err
	}
	result, err := invoke.DelegateAdd(ctx, pluginType, conf, nil)
	if err != nil {
		return networkStatus{}, fmt.Errorf("network %s/%s (plugin %s, interface %s): %w", s.Namespace, s.Name, pluginType, s.Interface, err)
	}
	status, err := statusOf(s.Namespace+"/"+s.Name, s.Interface, result, false)
	return status, err
}

// publish writes the network-status annotation through the pod's status
// subresource, as Multus does: the kubelet starts the containers after this.
func publish(ctx context.Context, restConfig *rest.Config, namespace, name string, statuses []networkStatus) error {
	clients, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	value, err := json.Marshal(statuses)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{networkStatusAnnotation: string(value)}}})
	if err != nil {
		return err
	}
	if _, err := clients.CoreV1().Pods(namespace).Patch(ctx, name, k8stypes.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("writing %s: %w", networkStatusAnnotation, err)
	}
	return nil
}

func del(args *skel.CmdArgs) error {
	conf, err := load(args.StdinData)
	if err != nil {
		return err
	}
	cache := cachePath(conf, args)
	raw, err := os.ReadFile(cache)
	if errors.Is(err, os.ErrNotExist) {
		return nil // nothing attached, or already detached
	}
	if err != nil {
		return err
	}
	var attached []attachment
	if err := json.Unmarshal(raw, &attached); err != nil {
		return fmt.Errorf("cache %s: %w", cache, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiDeadline)
	defer cancel()
	if err := detach(ctx, attached); err != nil {
		return err
	}
	return os.Remove(cache)
}

// detach runs DEL for each attachment, the last attached first.
func detach(ctx context.Context, attached []attachment) error {
	var errs []error
	for i := len(attached) - 1; i >= 0; i-- {
		a := attached[i]
		if err := os.Setenv("CNI_IFNAME", a.Interface); err != nil {
			return err
		}
		if err := invoke.DelegateDel(ctx, a.Type, a.Conf, nil); err != nil {
			errs = append(errs, fmt.Errorf("interface %s (plugin %s): %w", a.Interface, a.Type, err))
		}
	}
	return errors.Join(errs...)
}

// check has nothing of its own to check: the delegates' interfaces belong
// to the sandbox, and the kubelet does not ask.
func check(args *skel.CmdArgs) error {
	_, err := load(args.StdinData)
	return err
}

func load(stdin []byte) (*pluginConf, error) {
	conf := &pluginConf{}
	if err := json.Unmarshal(stdin, conf); err != nil {
		return nil, fmt.Errorf("npwg-emulation config: %w", err)
	}
	if conf.Kubeconfig == "" || conf.CacheDir == "" {
		return nil, errors.New("npwg-emulation config: give kubeconfig and cacheDir")
	}
	if err := version.ParsePrevResult(&conf.NetConf); err != nil {
		return nil, err
	}
	return conf, nil
}

func cachePath(conf *pluginConf, args *skel.CmdArgs) string {
	return filepath.Join(conf.CacheDir, args.ContainerID+"-"+args.IfName+".json")
}

func save(path string, attached []attachment) error {
	raw, err := json.Marshal(attached)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o600)
}
