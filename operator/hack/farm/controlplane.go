package main

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"daq.io/eventbuilder/operator/internal/testenv"
)

// kwokConfig is KWOK's configuration and the stages it plays for the
// simulated servers and their pods.
//
//go:embed kwok.yaml
var kwokConfig []byte

// simulatedLabel marks the Nodes KWOK manages.
const simulatedLabel = "eventbuilder.daq.io/farm-bench"

// controlPlane is a cluster's control plane from the binaries make builds
// in bin/: kube-apiserver and etcd (started as envtest starts them), and
// kube-scheduler, kube-controller-manager and KWOK's controller as
// processes of their own, each with its kubeconfig and its log in dir.
type controlPlane struct {
	env   *testenv.Env
	dir   string
	procs []*process
}

// startControlPlane starts it all; assets holds the Kubernetes binaries,
// kwok is KWOK's controller.
func startControlPlane(dir, assets, kwok, crds string) (*controlPlane, error) {
	// Objects in etcd counted every 5 s (apiserver_resource_objects), not
	// every minute, so that the steady state's count is current.
	env, err := testenv.StartWithAPIServerArgs(assets, map[string]string{"etcd-count-metric-poll-period": "5s"}, crds)
	if err != nil {
		return nil, err
	}
	cp := &controlPlane{env: env, dir: dir}
	// As ctrl.GetConfig does for the real manager: no client-side rate
	// limit on the benchmark's own client.
	env.Config.QPS, env.Config.Burst = -1, -1
	if err := cp.startComponents(assets, kwok); err != nil {
		cp.stop()
		return nil, err
	}
	return cp, nil
}

func (cp *controlPlane) startComponents(assets, kwok string) error {
	kubeconfig := func(user string) (string, error) {
		content, err := cp.env.KubeConfig(user, "system:masters")
		if err != nil {
			return "", err
		}
		path := filepath.Join(cp.dir, user+".kubeconfig")
		return path, os.WriteFile(path, content, 0o600)
	}
	scheduler, err := kubeconfig("kube-scheduler")
	if err != nil {
		return err
	}
	schedulerConfig := filepath.Join(cp.dir, "kube-scheduler.yaml")
	if err := os.WriteFile(schedulerConfig, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: false
`, scheduler)), 0o600); err != nil {
		return err
	}
	if err := cp.start("kube-scheduler", filepath.Join(assets, "kube-scheduler"),
		"--config="+schedulerConfig, "--secure-port=0"); err != nil {
		return err
	}
	controllerManager, err := kubeconfig("kube-controller-manager")
	if err != nil {
		return err
	}
	// Every controller a cluster runs by default: the node lifecycle
	// (NotReady taints, pods marked not ready), the disruption controller
	// (the PodDisruptionBudget a drain meets), garbage collection (a run's
	// pods go with it). Without a service-account key the token
	// controller stays off, which nothing here needs.
	if err := cp.start("kube-controller-manager", filepath.Join(assets, "kube-controller-manager"),
		"--kubeconfig="+controllerManager, "--secure-port=0", "--leader-elect=false", "--controllers=*"); err != nil {
		return err
	}
	kwokKubeconfig, err := kubeconfig("kwok")
	if err != nil {
		return err
	}
	kwokConfigPath := filepath.Join(cp.dir, "kwok.yaml")
	if err := os.WriteFile(kwokConfigPath, kwokConfig, 0o600); err != nil {
		return err
	}
	return cp.start("kwok", kwok, "--kubeconfig="+kwokKubeconfig, "--config="+kwokConfigPath,
		"--manage-nodes-with-label-selector="+simulatedLabel, "--node-lease-duration-seconds=40")
}

// start runs a component, its output in dir/<name>.log.
func (cp *controlPlane) start(name, binary string, args ...string) error {
	p, err := startProcess(name, filepath.Join(cp.dir, name+".log"), nil, binary, args...)
	if err != nil {
		return err
	}
	cp.procs = append(cp.procs, p)
	return nil
}

// check names a component that exited.
func (cp *controlPlane) check() error {
	var errs []error
	for _, p := range cp.procs {
		errs = append(errs, p.check())
	}
	return errors.Join(errs...)
}

func (cp *controlPlane) stop() {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		cp.procs[i].stop()
	}
	_ = cp.env.Stop()
}

// process is a child process whose output goes to a log file.
type process struct {
	name, log string
	cmd       *exec.Cmd
	done      chan struct{}
	err       error
}

func startProcess(name, log string, env []string, binary string, args ...string) (*process, error) {
	out, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, binary, err)
	}
	p := &process{name: name, log: log, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = out.Close()
		close(p.done)
	}()
	return p, nil
}

// check is an error if the process has exited.
func (p *process) check() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); its log: %s", p.name, p.err, p.log)
	default:
		return nil
	}
}

// stop ends the process: SIGTERM, and SIGKILL after 10 s.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
