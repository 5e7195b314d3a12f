// Package accepted records, for the operator's benchmarks, when each
// emulated builder accepted each rank table's epoch by configure, and
// waits until every live rank of a table has: the moment a failover or a
// start is done on the builders' side.
package accepted

import (
	"fmt"
	"sync"
	"time"

	"daq.io/eventbuilder/operator/internal/ranktable"
)

// Log is safe for concurrent use.
type Log struct {
	mu      sync.Mutex
	at      map[int64]map[int32]time.Time // epoch -> rank -> when configure was accepted
	changed chan struct{}
}

func New() *Log {
	return &Log{at: map[int64]map[int32]time.Time{}, changed: make(chan struct{}, 1)}
}

// Record notes that rank accepted epoch now.
func (l *Log) Record(epoch int64, rank int32) {
	l.mu.Lock()
	if l.at[epoch] == nil {
		l.at[epoch] = map[int32]time.Time{}
	}
	l.at[epoch][rank] = time.Now()
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// Configured waits until every live rank of doc's table has accepted its
// epoch, and returns when the last one did. failed, if not nil, is looked
// at on every change: an error it returns ends the wait.
func (l *Log) Configured(doc ranktable.Document, timeout time.Duration, failed func() error) (time.Time, error) {
	deadline := time.After(timeout)
	for {
		if failed != nil {
			if err := failed(); err != nil {
				return time.Time{}, err
			}
		}
		l.mu.Lock()
		var last time.Time
		missing := 0
		for _, r := range doc.Ranks {
			if r.State != ranktable.Live {
				continue
			}
			at, ok := l.at[doc.Epoch][int32(r.Rank)]
			if !ok {
				missing++
			} else if at.After(last) {
				last = at
			}
		}
		l.mu.Unlock()
		if missing == 0 {
			return last, nil
		}
		select {
		case <-l.changed:
		case <-time.After(100 * time.Millisecond): // failed is polled, not signalled
		case <-deadline:
			return time.Time{}, fmt.Errorf("epoch %d: %d live builders not configured after %v", doc.Epoch, missing, timeout)
		}
	}
}
