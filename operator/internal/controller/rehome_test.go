package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderemu"
	"daq.io/eventbuilder/operator/internal/ranktable"
)

// A server lost under a run whose endpoints read detector streams: its two
// units fail over to the spares, which read their own fibres, and every
// event lacks the lost server's streams (Degraded, StreamsUnread). Once the
// server is back and its endpoints' spare pods are Ready, the units go home
// in one table: the run reads every stream it read before, is Running, and
// the ranks they left are warm spares again; lost again, the server's units
// move onto those spares once more.
func TestUnitsGoHomeToTheirReadoutOnceTheirServerIsBack(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)
	smallFabric(t, "home", 0, 1, 2, 3) // every endpoint has fibres
	run := fabricRun(ns, "home", "home", 5, 2)
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatalf("create run: %v", err)
	}
	key := client.ObjectKeyFromObject(run)
	var doc ranktable.Document
	eventually(t, "rank table epoch 1", func() (err error) {
		doc, err = rankTable(ctx, ns, "home")
		return err
	})
	if got := roles(doc); got != "LLSSLLL." {
		t.Fatalf("rank table epoch %d roles %s, want LLSSLLL. (srv0 live, srv1 spare)", doc.Epoch, got)
	}
	planned := unitEndpoints(doc)
	all := []string{"home-eb-0", "home-eb-1", "home-eb-2", "home-eb-3", "home-eb-4", "home-eb-5", "home-eb-6"}
	pods := waitPods(t, ns, "home", all...)
	emu := map[string]*builderemu.Builder{}
	for name, pod := range pods {
		emu[name] = startPod(t, &pod)
	}
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)

	// srv0 goes NotReady: units 0 and 1 move to srv1's spares, away from
	// their fibres, which the table records as their home.
	setNodeReady(t, "home-srv0", corev1.ConditionFalse)
	fo := waitFailover(t, key, 2)
	waitPods(t, ns, "home", "home-eb-2", "home-eb-3", "home-eb-4", "home-eb-5", "home-eb-6")
	waitFailoverConfigured(t, key, 2)
	if doc, _ = rankTable(ctx, ns, "home"); roles(doc) != "..LLLLL." || doc.Ranks[2].Home != "home-srv0-numa0" || doc.Ranks[3].Home != "home-srv0-numa1" ||
		len(doc.UnreadStreams) != 2 {
		t.Fatalf("after the failover %+v: epoch %d roles %s, homes %q %q, unread %v; want ..LLLLL., units 0 and 1 with srv0's endpoints as home, srv0's streams unread",
			fo, doc.Epoch, roles(doc), doc.Ranks[2].Home, doc.Ranks[3].Home, doc.UnreadStreams)
	}
	waitPhase(t, key, ebv1.PhaseDegraded, ebv1.ReasonStreamsUnread)

	// srv0 comes back (a second after the failover: transition times have
	// whole seconds): its endpoints are spares again, and once their pods
	// are Ready the units go home, by configure.
	setNodeReady(t, "home-srv0", corev1.ConditionTrue, fo.ObservedTime.Truncate(time.Second).Add(time.Second))
	eventually(t, "srv0's endpoints spares again at epoch 3", func() (err error) {
		if doc, err = rankTable(ctx, ns, "home"); err == nil && (doc.Epoch != 3 || roles(doc) != "SSLLLLL.") {
			err = fmt.Errorf("epoch %d roles %s", doc.Epoch, roles(doc))
		}
		return err
	})
	back := waitPods(t, ns, "home", all...)
	for _, name := range []string{"home-eb-0", "home-eb-1"} {
		farm.Kill(string(pods[name].UID)) // the old builders went with their pods
		pod := back[name]
		emu[name] = startPod(t, &pod)
	}
	// Each goes as soon as its endpoint's pod is Ready: one table for
	// both, or one each.
	eventually(t, "units 0 and 1 home", func() (err error) {
		if doc, err = rankTable(ctx, ns, "home"); err == nil && (roles(doc) != "LLSSLLL." || doc.Ranks[0].Home != "" || doc.Ranks[1].Home != "") {
			err = fmt.Errorf("epoch %d roles %s, homes %q %q", doc.Epoch, roles(doc), doc.Ranks[0].Home, doc.Ranks[1].Home)
		}
		return err
	})
	if doc.Epoch != 4 && doc.Epoch != 5 {
		t.Errorf("units home at epoch %d, want 4 (together) or 5 (one by one)", doc.Epoch)
	}
	if got := unitEndpoints(doc); fmt.Sprint(got) != fmt.Sprint(planned) || len(doc.UnreadStreams) != 0 {
		t.Errorf("units on %v, unread streams %v; want every unit where it was planned, %v, reading every stream", got, doc.UnreadStreams, planned)
	}
	for _, r := range doc.Ranks {
		if r.Home != "" {
			t.Errorf("rank %d still records home %s", r.Rank, r.Home)
		}
	}
	expectEvent(t, ns, "home", "UnitsRehomed")
	for name, b := range emu {
		eventually(t, name+" at the last epoch", func() error {
			if e, p := b.Epoch(); e != doc.Epoch || p != 0 {
				return fmt.Errorf("epoch %d pending %d, want %d", e, p, doc.Epoch)
			}
			return nil
		})
	}
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
	// The spares' and the idle endpoint's streams are unread by plan, as at
	// the start; srv0's are read again.
	if c := meta.FindStatusCondition(getRun(t, key).Status.Conditions, ebv1.ConditionReadoutComplete); c == nil || strings.Contains(c.Message, "home-srv0") {
		t.Errorf("ReadoutComplete %+v, want srv0's streams read again", c)
	}

	// srv0 lost again, with its units home: both move to srv1's spares,
	// which stood by since they left them.
	home := doc.Epoch
	lastLoss := getRun(t, key).Status.LastFailover.ObservedTime.Time
	setNodeReady(t, "home-srv0", corev1.ConditionFalse, time.Now().Add(time.Second))
	waitFailover(t, key, home+1)
	if doc, _ = rankTable(ctx, ns, "home"); roles(doc) != "..LLLLL." || doc.Ranks[2].Home != "home-srv0-numa0" || doc.Ranks[3].Home != "home-srv0-numa1" {
		t.Fatalf("srv0 lost again (last loss %v): epoch %d roles %s, homes %q %q; want ..LLLLL., both units on srv1 away from home",
			lastLoss, doc.Epoch, roles(doc), doc.Ranks[2].Home, doc.Ranks[3].Home)
	}
}

// unitEndpoints maps each live unit of a table to its endpoint.
func unitEndpoints(d ranktable.Document) map[int]string {
	out := map[int]string{}
	for _, r := range d.Ranks {
		if r.State == ranktable.Live {
			out[*r.Unit] = r.Endpoint
		}
	}
	return out
}
