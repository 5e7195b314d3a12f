package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"daq.io/eventbuilder/operator/internal/builderstatus"
)

// silences keeps, per run, the rows of polls its builders left unanswered
// (builderstatus.Silences) from one reconcile to the next. In memory: an
// operator that restarts starts them afresh, which only delays a failover.
type silences struct {
	mu    sync.Mutex
	byRun map[types.NamespacedName]builderstatus.Silences
}

// record carries the run's rows over poll p.
func (s *silences) record(run types.NamespacedName, p *builderstatus.Poll) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byRun == nil {
		s.byRun = map[types.NamespacedName]builderstatus.Silences{}
	}
	s.byRun[run] = s.byRun[run].After(p)
}

// of returns the run's rows, by rank.
func (s *silences) of(run types.NamespacedName) map[int32]builderstatus.Silence {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byRun[run].Rows
}

// any reports whether a builder of the run left its last poll unanswered.
func (s *silences) any(run types.NamespacedName) bool { return len(s.of(run)) > 0 }

// forget drops a run's rows (the run is gone).
func (s *silences) forget(run types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byRun, run)
}
