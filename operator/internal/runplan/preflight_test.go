package runplan

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"daq.io/eventbuilder/operator/internal/planner"
)

func TestShortfalls(t *testing.T) {
	q := resource.MustParse
	asks := func(numa int) corev1.ResourceList {
		return corev1.ResourceList{"cpu": q("4"), corev1.ResourceName(fmt.Sprintf("rdma/hca_numa%d", numa)): q("1"),
			"daq.io/tell40": q("2")}
	}
	offers := corev1.ResourceList{"cpu": q("32"), "rdma/hca_numa0": q("1k"), "rdma/hca_numa1": q("1k"), "daq.io/tell40": q("4")}
	for _, tc := range []struct {
		name        string
		allocatable map[string]corev1.ResourceList
		want        string
	}{
		{"two endpoints' cards together exceed the node's", map[string]corev1.ResourceList{
			"s0": {"cpu": q("32"), "rdma/hca_numa0": q("1"), "rdma/hca_numa1": q("1"), "daq.io/tell40": q("3")}, "s1": offers, "s2": offers, "s3": offers},
			"[node s0 offers 3 daq.io/tell40, ranks 0, 1 ask for 4]"},
		{"every node offers all", map[string]corev1.ResourceList{"s0": offers, "s1": offers, "s2": offers, "s3": offers}, "[]"},
		{"no RDMA device plugin on s0", map[string]corev1.ResourceList{
			"s0": {"cpu": q("32"), "daq.io/tell40": q("4")}, "s1": offers, "s2": offers, "s3": offers},
			"[node s0 offers none rdma/hca_numa0, ranks 0 ask for 1 node s0 offers none rdma/hca_numa1, ranks 1 ask for 1]"},
		{"too few cards and CPUs on s2", map[string]corev1.ResourceList{
			"s0": offers, "s1": offers, "s2": {"cpu": q("2"), "rdma/hca_numa0": q("1"), "rdma/hca_numa1": q("1"), "daq.io/tell40": q("1")}, "s3": offers},
			"[node s2 offers 2 cpu, ranks 4, 5 ask for 8 node s2 offers 1 daq.io/tell40, ranks 4, 5 ask for 4]"},
		{"enough cards for one endpoint, not for both", map[string]corev1.ResourceList{
			"s0": offers, "s1": offers, "s2": offers, "s3": {"cpu": q("32"), "rdma/hca_numa0": q("1"), "daq.io/tell40": q("3")}},
			"[]"}, // s3 holds one rank (6): 2 of 3 cards
		{"a node gone is not checked here", map[string]corev1.ResourceList{"s1": offers, "s2": offers, "s3": offers}, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, table := plan(t, 5, 2, nil) // LLSSLLL.: s0 0-1, s1 2-3 (spares), s2 4-5, s3 6
			placed := Placements(table, Endpoints(f))
			if len(placed) != 7 {
				t.Fatalf("%d placements, want 7 (live and spare ranks)", len(placed))
			}
			requests := func(ep planner.Endpoint) corev1.ResourceList { return asks(ep.NUMA) }
			if got := fmt.Sprint(Shortfalls(placed, requests, tc.allocatable)); got != tc.want {
				t.Errorf("Shortfalls =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
