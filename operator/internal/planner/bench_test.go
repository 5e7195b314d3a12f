package planner

import "testing"

func BenchmarkPlanLHCb(b *testing.B) {
	f := lhcb()
	req := Request{Units: 318, Spares: 8}
	for b.Loop() {
		if _, err := Plan(f, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFailoverLHCb fails a unit on a leaf with a spare: two link
// checks over 360 phases (before and after) and the table copy.
func BenchmarkFailoverLHCb(b *testing.B) {
	f := lhcb()
	table := mustPlan(b, f, Request{Units: 318, Spares: 8})
	for b.Loop() {
		if _, _, err := Failover(f, table, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckLinkLoadLHCb(b *testing.B) {
	f := lhcb()
	table := mustPlan(b, f, Request{Units: 318, Spares: 8})
	for b.Loop() {
		if _, err := CheckLinkLoad(f, table); err != nil {
			b.Fatal(err)
		}
	}
}
