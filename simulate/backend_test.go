package simulate

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/gateway/sim"
)

// A retry draws afresh: under a 20 % transient rate a request that failed
// fails again about as often as any request fails, not every time (which
// tripped circuits on every failing request's retries).
func TestTransientDrawsAreFreshOnRetry(t *testing.T) {
	clock := NewClock(Epoch)
	b := NewBackend(sim.New(sim.Config{Name: "claude", Seed: 1}, clock), "browser", clock, 1)
	draws, fails, afterFail, failAfterFail := 0, 0, 0, 0
	for task := range 2000 {
		req := gateway.Request{TaskID: fmt.Sprintf("explorer/research/q%d", task)}
		failed := false
		for range 6 {
			f := b.draw(req) < 0.2
			draws++
			if f {
				fails++
			}
			if failed {
				afterFail++
				if f {
					failAfterFail++
				}
			}
			failed = f
		}
	}
	rate, again := float64(fails)/float64(draws), float64(failAfterFail)/float64(afterFail)
	require.InDelta(t, 0.2, rate, 0.03, "failure rate")
	require.InDelta(t, 0.2, again, 0.05, "failure rate of a retry after a failure")
}
