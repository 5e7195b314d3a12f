package e2e

import (
	"context"
	"time"
)

// sampler calls sample every 100 ms in the background until halted: the
// suite's watches of a run or of the leader lease while a fault plays out.
type sampler struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func startSampling(ctx context.Context, sample func(ctx context.Context)) *sampler {
	return startSamplingEvery(ctx, 100*time.Millisecond, sample)
}

// startSamplingEvery calls sample every period (a soak's watch samples
// longer than a test's).
func startSamplingEvery(ctx context.Context, period time.Duration, sample func(ctx context.Context)) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for ctx.Err() == nil {
			sample(ctx)
			time.Sleep(period) // sampling, not synchronisation
		}
	}()
	return s
}

// halt ends the sampling once the sample under way has returned: what the
// samples wrote may then be read without a lock.
func (s *sampler) halt() {
	s.cancel()
	<-s.done
}
