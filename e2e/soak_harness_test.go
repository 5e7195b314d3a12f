package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"daq.io/eventbuilder/e2e/soak"
	ebv1alpha1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// soakRecoveryTimeout is how long a fault may keep a run from building
// before the soak records it as not back and goes on.
const soakRecoveryTimeout = 5 * time.Minute

// soakSession is a soak under way (make soak's TestSoak, and the suite's
// TestSoakSmoke): the production run on a Fabric with spares (readout
// drivers, builders, consumers that check every event) and a run without
// a Fabric, a watch sampling both every 500 ms, and what each fault came
// to. Nothing in the product knows it is a soak.
type soakSession struct {
	t       *testing.T
	ctx     context.Context
	name    string // of its files in $E2E_ARTIFACTS/soak: the seed, or the test's
	runs    map[string]client.ObjectKey
	workers []string
	watch   *soakWatch
	summary soak.Summary
	marks   []soak.Mark
	start   time.Time
	// lostAt and perCycleAt are the runs' lost-event totals and set
	// cycles at the last fault: its loss is counted up to the next.
	lostAt     map[string]soak.Lost
	perCycleAt map[string]int64
}

// startSoak starts both runs, each building, and the watch; the runs are
// deleted when the test ends.
func startSoak(ctx context.Context, t *testing.T, seed uint64, name string) *soakSession {
	t.Helper()
	production, fabric, workers := startProductionRun(ctx, t, "soak-production", "soak", "production", []int{0, 1}, func(r *ebv1alpha1.EventBuilderRun) {
		r.Spec.Builder.IncompleteEvents = ebv1alpha1.IncompleteFlag
	})
	productionKey := client.ObjectKeyFromObject(production)
	t.Cleanup(func() { removeRunAndFabric(context.Background(), t, productionKey, fabric.Name) })
	plainKey := client.ObjectKey{Namespace: "soak-plain", Name: "plain"}
	runningRun(ctx, t, plainKey, 4)
	t.Cleanup(func() { deleteRun(context.Background(), t, plainKey) })
	t.Cleanup(func() { placeCoreDNS(context.Background(), t, nil) }) // server-lost puts it on its victim
	runs := map[string]client.ObjectKey{"production": productionKey, "plain": plainKey}
	return &soakSession{t: t, ctx: ctx, name: name, runs: runs, workers: workers, watch: watchSoak(ctx, runs),
		summary: soak.Summary{Seed: seed}, start: time.Now()}
}

// fault waits out f's gap, injects it and records what it came to.
func (s *soakSession) fault(i int, f soak.Fault) soak.Outcome {
	t := s.t
	t.Helper()
	select {
	case <-s.ctx.Done():
		t.Fatal(s.ctx.Err())
	case <-time.After(f.Gap): // the plan's random gap: no condition to wait for
	}
	s.marks = append(s.marks, soak.Mark{At: time.Since(s.start), Class: f.Class})
	s.countLoss()
	o := inject(s.ctx, t, f, s.workers, s.runs, s.watch)
	s.summary.Outcomes = append(s.summary.Outcomes, o)
	t.Logf("soak fault %d (seed %d) at %s: %s on %s: disrupted %v, detected %s, building again %s (%s after its end), building on from %s, "+
		"not building %s in all, back %v", i, s.summary.Seed, o.At.UTC().Format("15:04:05.0"), o.Class, o.Victim, o.Disrupted, o.Detected.Round(100*time.Millisecond),
		o.Recovered.Round(100*time.Millisecond), o.AfterEnd().Round(100*time.Millisecond), o.Settled.Round(100*time.Millisecond),
		o.Down.Round(100*time.Millisecond), o.Back)
	return o
}

// towardUnits returns f with its Pick, for a fault that takes a worker
// (paused, stopped, lost), turned to one of the workers that run a live
// unit of some run, chosen by the plan's pick among them: after a few
// failovers the units may all sit on one worker, and a fault on a server
// that holds only spares tests little. Other faults are returned as they
// are; with no live unit anywhere, so is f.
func (s *soakSession) towardUnits(f soak.Fault) soak.Fault {
	if f.Class != soak.WorkerPaused && f.Class != soak.WorkerStopped && f.Class != soak.ServerLost {
		return f
	}
	var busy []int // indexes into s.workers
	for _, key := range s.runs {
		var run ebv1alpha1.EventBuilderRun
		if err := k8sClient.Get(s.ctx, key, &run); err != nil {
			continue
		}
		for _, rk := range run.Status.Ranks {
			if i := slices.Index(s.workers, rk.Node); rk.Role == ebv1alpha1.RoleLive && i >= 0 && !slices.Contains(busy, i) {
				busy = append(busy, i)
			}
		}
	}
	if len(busy) > 0 {
		slices.Sort(busy)
		f.Pick = busy[f.Pick%len(busy)]
	}
	return f
}

// soakWholeTimeout bounds the wait, after a fault, for every run whole
// again: a restarted server's device plugins and spare pods, a vacated
// endpoint offered again (--reoffer-vacated-after, 15 s in the chart),
// the units home.
const soakWholeTimeout = 4 * time.Minute

// whole waits until every run is whole again (runWhole) and records in the
// last fault's outcome how long after it that was, or that the wait gave
// up: one fault at a time, the next finds each unit home and each spare
// standing by, as a farm's daily fault does.
func (s *soakSession) whole() {
	o := &s.summary.Outcomes[len(s.summary.Outcomes)-1]
	why := ""
	for s.ctx.Err() == nil && time.Since(o.At) < soakWholeTimeout {
		if why = s.notWhole(); why == "" {
			o.Whole = time.Since(o.At)
			s.t.Logf("soak: every run whole again %s after the fault", o.Whole.Round(100*time.Millisecond))
			return
		}
		time.Sleep(500 * time.Millisecond) // the sampler's pace, between two looks at the condition
	}
	o.NotWhole = true
	s.t.Logf("soak: not every run whole again %s after the fault (%s); the next fault goes on", soakWholeTimeout, why)
}

// notWhole says why some run is not whole (runWhole), or "" when each is.
func (s *soakSession) notWhole() string {
	for _, key := range s.runs {
		if whole, why := runWhole(s.ctx, key); !whole {
			return why
		}
	}
	return ""
}

// runWhole says whether the run is whole: building, in phase Running
// (nothing degraded: every stream read), spec.units units live, none
// away from its home endpoint, spec.spares spares standing by; or why not.
func runWhole(ctx context.Context, key client.ObjectKey) (bool, string) {
	var run ebv1alpha1.EventBuilderRun
	if err := k8sClient.Get(ctx, key, &run); err != nil {
		return false, err.Error()
	}
	doc, err := loadRankTable(ctx, key.Namespace, key.Name)
	if err != nil {
		return false, err.Error()
	}
	standing := 0
	for _, rk := range run.Status.Ranks {
		if rk.Role == ebv1alpha1.RoleSpare && rk.State == "RUNNING" {
			standing++
		}
	}
	away := slices.ContainsFunc(doc.Ranks, func(r rankTableRank) bool { return r.Home != "" })
	whole := whyNotBuilding(&run) == "" && run.Status.Phase == ebv1alpha1.PhaseRunning && run.Status.LiveUnits == run.Spec.Units &&
		standing == int(run.Spec.Spares) && !away && len(doc.UnreadStreams) == 0
	return whole, fmt.Sprintf("run %s: %d of %d spares standing by, unread streams %v, a unit away from home %v; %s", key.Name, standing,
		run.Spec.Spares, doc.UnreadStreams, away, describeFailover(&run))
}

// finish reports the soak however it ended (defer it: a fault it could
// not inject ends it with t.Fatal): prints the report, writes it with the
// samples and the timeline to $E2E_ARTIFACTS/soak, and fails the test on
// anything that must never happen and on any fault the runs did not
// recover from.
func (s *soakSession) finish() {
	t, ctx, summary := s.t, s.ctx, &s.summary
	summary.Length = time.Since(s.start)
	s.countLoss()
	summary.Building, summary.Read = s.watch.stop()
	summary.Counts = map[string]string{}
	summary.Problems = append(summary.Problems, s.watch.twice...)
	for name, key := range s.runs {
		var run ebv1alpha1.EventBuilderRun
		if err := k8sClient.Get(ctx, key, &run); err != nil {
			t.Error(err)
			continue
		}
		st := run.Status
		counts := fmt.Sprintf("built %d, incomplete %d, dropped %d", st.EventsBuilt, st.EventsIncomplete, st.EventsDropped)
		if c := st.Consumed; c != nil {
			counts += fmt.Sprintf("; consumed %d complete, %d incomplete (flagged), %d rejected", c.EventsComplete, c.EventsIncomplete, c.Rejected)
			if c.Rejected != 0 {
				summary.Problems = append(summary.Problems, fmt.Sprintf("run %s: its consumers rejected %d events", name, c.Rejected))
			}
		}
		summary.Counts[name] = counts
	}
	report := soak.Report(*summary)
	fmt.Print(report)
	if dir := os.Getenv("E2E_ARTIFACTS"); dir != "" {
		if err := os.MkdirAll(filepath.Join(dir, "soak"), 0o755); err == nil {
			_ = os.WriteFile(filepath.Join(dir, "soak", "report-"+s.name+".txt"), []byte(report), 0o644)
			_ = os.WriteFile(filepath.Join(dir, "soak", "samples-"+s.name+".csv"), []byte(s.watch.csv()), 0o644)
			png := filepath.Join(dir, "soak", "timeline-"+s.name+".png")
			if f, err := os.Create(png); err == nil {
				if err := soak.Timeline(s.watch.timeline(s.start), s.marks, f); err != nil {
					t.Errorf("timeline: %v", err)
				}
				f.Close()
				t.Logf("soak: report, samples and timeline in %s", filepath.Dir(png))
			}
			s.saveLogs(filepath.Join(dir, "soak", "logs-"+s.name))
		}
	}
	for _, p := range summary.Problems {
		t.Error(p)
	}
	for i, o := range summary.Outcomes {
		if !o.Back {
			t.Errorf("fault %d, %s on %s: the runs were not all building again within %s", i+1, o.Class, o.Victim, soakRecoveryTimeout)
		}
	}
}

// saveLogs writes to dir, before the runs are deleted, what a slow
// recovery is read from: every builder's log (and its previous
// container's, where it restarted) and the operators', with timestamps.
func (s *soakSession) saveLogs(dir string) {
	if err := errors.Join(os.RemoveAll(dir), os.MkdirAll(dir, 0o755)); err != nil { // no log of an earlier soak left among them
		s.t.Logf("soak: logs not saved: %v", err)
		return
	}
	save := func(file string, args ...string) {
		f, err := os.Create(filepath.Join(dir, file))
		if err != nil {
			s.t.Logf("soak: %v", err)
			return
		}
		defer f.Close()
		kubectl(s.ctx, f, append([]string{"logs", "--timestamps"}, args...)...)
	}
	// Each pod's log is named with its node, so that a worker's fault reads
	// as what ran on it; a container that restarted has its previous log too.
	savePods := func(namespace string, labels client.MatchingLabels, container string) {
		var pods corev1.PodList
		if err := k8sClient.List(s.ctx, &pods, client.InNamespace(namespace), labels); err != nil {
			s.t.Logf("soak: logs of %s in %s not saved: %v", labels, namespace, err)
			return
		}
		for _, pod := range pods.Items {
			for _, c := range pod.Status.ContainerStatuses {
				if c.Name != container {
					continue
				}
				name := fmt.Sprintf("%s.%s@%s", pod.Name, c.Name, pod.Spec.NodeName)
				save(name+".log", "-n", namespace, pod.Name, "-c", c.Name)
				if c.RestartCount > 0 {
					save(name+".previous.log", "-n", namespace, pod.Name, "-c", c.Name, "--previous")
				}
			}
		}
	}
	for _, key := range s.runs {
		savePods(key.Namespace, client.MatchingLabels{"app.kubernetes.io/name": "eventbuilder"}, "builder")
	}
	savePods(operatorNamespace, client.MatchingLabels{"app.kubernetes.io/name": "eventbuilder-operator"}, "manager")
	// The operator's events say what it decided and why (a failover's
	// choice, a unit dropped), whatever its restarts took from its logs;
	// the API server keeps them an hour (--event-ttl).
	for _, key := range s.runs {
		f, err := os.Create(filepath.Join(dir, "events-"+key.Namespace+".txt"))
		if err != nil {
			s.t.Logf("soak: %v", err)
			continue
		}
		// The operator's events carry eventTime, the kubelet's lastTimestamp;
		// both are created when they first happen.
		kubectl(s.ctx, f, "get", "events", "-n", key.Namespace, "--sort-by=.metadata.creationTimestamp",
			"-o", "custom-columns=CREATED:.metadata.creationTimestamp,EVENT:.eventTime,LAST:.lastTimestamp,COUNT:.count,TYPE:.type,"+
				"REASON:.reason,OBJECT:.involvedObject.name,MESSAGE:.message")
		f.Close()
	}
	s.t.Logf("soak: builder and operator logs, and the runs' events, in %s", dir)
}

// countLoss gives the last fault what the runs lost since it, and starts
// counting for the next.
func (s *soakSession) countLoss() {
	lost, perCycle := s.watch.lost()
	if n := len(s.summary.Outcomes); n > 0 {
		o := &s.summary.Outcomes[n-1]
		if o.Runs == nil {
			o.Runs = map[string]soak.RunOutcome{}
		}
		for run, total := range lost {
			r := o.Runs[run]
			r.Lost, r.PerCycle = total.Sub(s.lostAt[run]), s.perCycleAt[run]
			o.Runs[run] = r
		}
	}
	s.lostAt, s.perCycleAt = lost, perCycle
}

// inject applies fault f, heals it after its hold where it is healed, and
// times how long the runs took to notice and to build again.
func inject(ctx context.Context, t *testing.T, f soak.Fault, workers []string, runs map[string]client.ObjectKey, watch *soakWatch) soak.Outcome {
	t.Helper()
	o := soak.Outcome{Class: f.Class}
	worker := workers[f.Pick%len(workers)]
	var at, healed time.Time
	switch f.Class {
	case soak.PodKilled:
		pod := soakVictimPod(ctx, t, runs, f.Pick)
		if pod == nil {
			return soak.Outcome{Class: f.Class, Victim: "none: no run has a live unit", Back: false}
		}
		o.Victim = pod.Name
		at = deleteBuilderPod(ctx, t, pod)
	case soak.BuilderStopped, soak.ConsumerStalled:
		pick, container := f.Pick, "builder"
		if f.Class == soak.ConsumerStalled {
			pick, container = 2*(f.Pick/2), "consumer" // a production unit's: the plain run has none
		}
		pod := soakVictimPod(ctx, t, runs, pick)
		if pod == nil {
			return soak.Outcome{Class: f.Class, Victim: "none: no run has a live unit", Back: false}
		}
		o.Victim = pod.Name + "/" + container
		pid := containerPID(t, pod, container)
		at = time.Now()
		nodeExec(t, pod.Spec.NodeName, "kill", "-STOP", pid)
		time.Sleep(f.Hold) // the fault lasts this long: nothing to wait for
		nodeExec(t, pod.Spec.NodeName, "kill", "-CONT", pid)
		healed = time.Now()
	case soak.Partition:
		pod := soakVictimPod(ctx, t, runs, 2*(f.Pick/2)+1) // a plain unit's: its data path is the pod network
		if pod == nil {
			return soak.Outcome{Class: f.Class, Victim: "none: no run has a live unit", Back: false}
		}
		o.Victim = pod.Name
		owner := runs["plain"]
		if pod.Namespace != owner.Namespace {
			owner = runs["production"]
		}
		rules := cutOff(ctx, t, owner, pod)
		at = time.Now()
		iptablesOnWorkers(t, workers, "-I", rules)
		time.Sleep(f.Hold)
		iptablesOnWorkers(t, workers, "-D", rules)
		healed = time.Now()
	case soak.WorkerPaused, soak.WorkerStopped:
		spreadOperators(ctx, t) // as the chart spreads them: a server holds one operator at most
		o.Victim = worker
		lose, back := "pause", "unpause"
		if f.Class == soak.WorkerStopped {
			lose, back = "stop", "start"
		}
		at = time.Now()
		docker(t, lose, worker)
		time.Sleep(f.Hold)
		docker(t, back, worker)
		healed = time.Now()
	case soak.ServerLost, soak.LeaderServerLost:
		node, leader := worker, spreadOperators(ctx, t)
		if f.Class == soak.LeaderServerLost {
			node = leader.Spec.NodeName
			if !slices.Contains(workers, node) {
				return soak.Outcome{Class: f.Class, Victim: "none: the leading operator runs on " + node + ", no worker", Back: false}
			}
		} else {
			// The leader's server is the other class: with the leader on
			// the pick, the other worker goes.
			if node == leader.Spec.NodeName {
				node = workers[(f.Pick+1)%len(workers)]
			}
			placeCoreDNS(ctx, t, map[string]string{corev1.LabelHostname: node})
		}
		o.Victim = node
		at = time.Now()
		docker(t, "kill", node) // power lost: nothing shuts down
		time.Sleep(f.Hold)
		docker(t, "start", node)
		healed = time.Now()
	case soak.OperatorKilled:
		pod, err := leaderPod(ctx)
		if err != nil || pod == nil {
			t.Fatalf("the leading operator's pod: %v (none found)", err)
		}
		o.Victim = pod.Name
		at = time.Now()
		if err := k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
			t.Fatalf("delete operator pod %s: %v", pod.Name, err)
		}
	case soak.APIServerKilled:
		node := controlPlaneNode(ctx, t)
		o.Victim = node + "/kube-apiserver"
		at = time.Now()
		nodeExec(t, node, "pkill", "-KILL", "-x", "kube-apiserver")
	default:
		t.Fatalf("soak fault class %q has no injection", f.Class)
	}
	if healed.IsZero() {
		healed = at // not held: over as it happens
	}
	o.At, o.Held = at, healed.Sub(at)
	var v soak.Verdict
	v, o.Back, o.Runs = watch.after(ctx, at, healed, soakRecoveryTimeout)
	o.Disrupted, o.Detected, o.Recovered, o.Settled, o.Down = v.Disrupted, v.Detected, v.Building, v.Settled, v.Down
	return o
}

// soakVictimPod is a live unit's pod of one of the runs, chosen by pick
// (production when even), or of the other run when that one has none left
// (a run that lost every unit with no spare left); nil when neither has.
func soakVictimPod(ctx context.Context, t *testing.T, runs map[string]client.ObjectKey, pick int) *corev1.Pod {
	t.Helper()
	order := []string{"plain", "production"}
	if pick%2 == 0 {
		order = []string{"production", "plain"}
	}
	for _, name := range order {
		key := runs[name]
		var run ebv1alpha1.EventBuilderRun
		if err := k8sClient.Get(ctx, key, &run); err != nil {
			t.Fatal(err)
		}
		var pods []string
		for _, u := range run.Status.Units {
			if u.Pod != "" {
				pods = append(pods, u.Pod)
			}
		}
		if len(pods) > 0 {
			return builderPod(ctx, t, key.Namespace, pods[(pick/2)%len(pods)])
		}
		t.Logf("soak: run %s has no unit with a pod to hit: %s", key, describe(&run))
	}
	return nil
}

// cutOff is the iptables FORWARD rules that cut pod off from the other
// pods of run (its peers), both ways.
func cutOff(ctx context.Context, t *testing.T, key client.ObjectKey, pod *corev1.Pod) [][]string {
	t.Helper()
	var run ebv1alpha1.EventBuilderRun
	if err := k8sClient.Get(ctx, key, &run); err != nil {
		t.Fatal(err)
	}
	var rules [][]string
	for _, u := range run.Status.Units {
		if u.Pod == "" || u.Pod == pod.Name {
			continue
		}
		ip := builderPod(ctx, t, key.Namespace, u.Pod).Status.PodIP
		rules = append(rules, []string{"-s", pod.Status.PodIP, "-d", ip, "-j", "DROP"}, []string{"-s", ip, "-d", pod.Status.PodIP, "-j", "DROP"})
	}
	return rules
}

// iptablesOnWorkers inserts (-I) or deletes (-D) the FORWARD rules on
// every worker.
func iptablesOnWorkers(t *testing.T, workers []string, op string, rules [][]string) {
	t.Helper()
	for _, node := range workers {
		for _, rule := range rules {
			nodeExec(t, node, append([]string{"iptables", op, "FORWARD"}, rule...)...)
		}
	}
}

// containerPID is the host PID of a container's process, as the node's
// containerd has it (the pod's own PID namespace shields its PID 1 from
// SIGSTOP sent inside it).
func containerPID(t *testing.T, pod *corev1.Pod, container string) string {
	t.Helper()
	var id string
	for _, c := range pod.Status.ContainerStatuses {
		if c.Name == container {
			_, id, _ = strings.Cut(c.ContainerID, "://")
		}
	}
	if id == "" {
		t.Fatalf("pod %s has no running %s container", pod.Name, container)
	}
	out := nodeExec(t, pod.Spec.NodeName, "ctr", "-n", "k8s.io", "task", "ls")
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == id {
			return f[1]
		}
	}
	t.Fatalf("no task of container %s (pod %s) on %s:\n%s", id, pod.Name, pod.Spec.NodeName, out)
	return ""
}

// nodeExec runs a command on a kind node's container and returns its output.
func nodeExec(t *testing.T, node string, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", append([]string{"exec", node}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker exec %s %v: %v\n%s", node, args, err, out)
	}
	return string(out)
}

// soakWatch samples the runs every 500 ms (a read of each: the suite's
// client allows 5 a second): whether each builds, by its status's states
// (phase Running or Degraded, every live unit RUNNING and building, none
// lost by a peer), the events its units counted lost (its counters are
// written only every 10 s), and whether a unit is live on two ranks at
// once.
type soakWatch struct {
	*sampler
	runs map[string]client.ObjectKey

	mu       sync.Mutex
	samples  []soakSample
	building map[string]int // samples in which the run built
	read     map[string]int // samples in which its status could be read
	twice    []string       // units seen live on two ranks, once per run
	tally    map[string]*soak.Tally
	perCycle map[string]int64 // events a set cycle builds, as last read
}

type soakSample struct {
	at       time.Time
	building map[string]bool   // by run; a run whose status could not be read is absent
	why      map[string]string // why not, by run
	rate     map[string]int64
}

func watchSoak(ctx context.Context, runs map[string]client.ObjectKey) *soakWatch {
	w := &soakWatch{runs: runs, building: map[string]int{}, read: map[string]int{}, tally: map[string]*soak.Tally{}, perCycle: map[string]int64{}}
	for name := range runs {
		w.tally[name] = &soak.Tally{}
	}
	w.sampler = startSamplingEvery(ctx, 500*time.Millisecond, func(ctx context.Context) {
		s := soakSample{at: time.Now(), building: map[string]bool{}, why: map[string]string{}, rate: map[string]int64{}}
		var twice []string
		lost, perCycle := map[string]map[string]soak.Lost{}, map[string]int64{}
		for name, key := range runs {
			var run ebv1alpha1.EventBuilderRun
			if err := k8sClient.Get(ctx, key, &run); err != nil {
				continue // the API server may be the fault: unknown, not stopped
			}
			lost[name], perCycle[name] = unitsLost(&run)
			s.why[name] = whyNotBuilding(&run)
			s.building[name] = s.why[name] == ""
			s.rate[name] = run.Status.EventRate
			if unit := unitLiveTwice(&run); unit != "" {
				twice = append(twice, fmt.Sprintf("run %s: %s", name, unit))
			}
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.samples = append(w.samples, s)
		for name, units := range lost {
			w.tally[name].Observe(units)
			w.perCycle[name] = perCycle[name]
		}
		for name, b := range s.building {
			w.read[name]++
			if b {
				w.building[name]++
			}
		}
		for _, t := range twice {
			if !slices.ContainsFunc(w.twice, func(seen string) bool { return strings.SplitN(seen, ":", 2)[0] == strings.SplitN(t, ":", 2)[0] }) {
				w.twice = append(w.twice, t)
			}
		}
	})
	return w
}

// unitsLost is what each unit of run counted lost, by pod, and the events
// a cycle of its set builds (live units times packingFactor).
func unitsLost(run *ebv1alpha1.EventBuilderRun) (map[string]soak.Lost, int64) {
	out := map[string]soak.Lost{}
	for _, u := range run.Status.Units {
		if u.Pod != "" {
			out[u.Pod] = soak.Lost{Dropped: u.EventsDropped, Incomplete: u.EventsIncomplete}
		}
	}
	return out, int64(run.Status.LiveUnits) * int64(run.Spec.Builder.PackingFactor)
}

// lost is each run's lost-event total so far, and its events per cycle.
func (w *soakWatch) lost() (map[string]soak.Lost, map[string]int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	lost := map[string]soak.Lost{}
	for name, t := range w.tally {
		lost[name] = t.Total
	}
	return lost, maps.Clone(w.perCycle)
}

// after waits, from a fault at `at` that ended at `healed`, until
// soak.Judge finds it over (its verdict on every run together), and,
// judged on each run's samples alone, what it did to each.
func (w *soakWatch) after(ctx context.Context, at, healed time.Time, timeout time.Duration) (v soak.Verdict, back bool,
	runs map[string]soak.RunOutcome) {
	perRun := map[string][]soak.Point{}
	for time.Since(at) < timeout && ctx.Err() == nil {
		time.Sleep(250 * time.Millisecond) // the sampler's pace: its samples are what is read
		var points []soak.Point
		clear(perRun)
		w.mu.Lock()
		for _, s := range w.samples {
			if s.at.Before(at) || len(s.building) != len(w.runs) {
				continue // before the fault, or a run's status unread (the API server down): unknown
			}
			every := true
			for name, b := range s.building {
				every = every && b
				perRun[name] = append(perRun[name], soak.Point{At: s.at.Sub(at), Building: b})
			}
			points = append(points, soak.Point{At: s.at.Sub(at), Building: every})
		}
		w.mu.Unlock()
		if v = soak.Judge(points, healed.Sub(at)); v.Done {
			back = true
			break
		}
	}
	if !back {
		v.Building, v.Settled = timeout, timeout // what was seen: a run stopped, or never read
	}
	runs = map[string]soak.RunOutcome{}
	for name, points := range perRun {
		r := soak.Judge(points, healed.Sub(at))
		runs[name] = soak.RunOutcome{Disrupted: r.Disrupted, Recovered: r.Building, Settled: r.Settled, Down: r.Down}
	}
	return v, back, runs
}

// stop ends the sampling and returns, per run, the share of the samples
// that could read its status in which it built, and the share that could.
func (w *soakWatch) stop() (building, read map[string]float64) {
	w.halt()
	w.mu.Lock()
	defer w.mu.Unlock()
	building, read = map[string]float64{}, map[string]float64{}
	for name := range w.runs {
		if w.read[name] > 0 {
			building[name] = float64(w.building[name]) / float64(w.read[name])
		}
		if len(w.samples) > 0 {
			read[name] = float64(w.read[name]) / float64(len(w.samples))
		}
	}
	return building, read
}

// timeline is the samples' event rates, from start on.
func (w *soakWatch) timeline(start time.Time) []soak.Sample {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]soak.Sample, 0, len(w.samples))
	for _, s := range w.samples {
		rates := map[string]float64{}
		for run, r := range s.rate {
			rates[run] = float64(r)
		}
		out = append(out, soak.Sample{At: s.at.Sub(start), Rate: rates})
	}
	return out
}

// csv is the samples, a line per sample: seconds since the first, and per
// run (in name order) building (0 or 1) and event rate; for plotting the
// soak's timeline.
func (w *soakWatch) csv() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := []string{"production", "plain"}
	var b strings.Builder
	b.WriteString("seconds")
	for _, n := range names {
		fmt.Fprintf(&b, ",%s_building,%s_rate,%s_why_not", n, n, n)
	}
	b.WriteString("\n")
	for _, s := range w.samples {
		fmt.Fprintf(&b, "%.1f", s.at.Sub(w.samples[0].at).Seconds())
		for _, n := range names {
			building := "unknown"
			if b, ok := s.building[n]; ok {
				building = strconv.FormatBool(b)
			}
			fmt.Fprintf(&b, ",%s,%d,%s", building, s.rate[n], s.why[n])
		}
		b.WriteString("\n")
	}
	return b.String()
}
