package actors

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
)

// max_task_retries (Options.ValidationRetries): N failed answers are
// retried, the (N+1)th fails the task; negative is none at all.
func TestMaxTaskRetriesFailsTheNextFailure(t *testing.T) {
	for _, tc := range []struct{ option, retries int }{{1, 1}, {5, 5}, {-1, 0}} {
		t.Run(fmt.Sprint(tc.option), func(t *testing.T) {
			b, _ := fakeRig(t)
			b.opts.ValidationRetries = tc.option
			b.simNamed("a").Refuse(func(gateway.Request) (string, bool) { return "Sorry, I can't help with that.", true })
			b.start()
			_, err := b.sys.Submit(probeTask(1, 0))
			require.NoError(t, err)
			retries := 0
			for {
				b.sys.Tick()
				n := b.waitEvent("a retry or the failure", func(n Notice) bool {
					return n.Event.GetTaskRetryScheduled() != nil || n.Event.GetTaskFailed() != nil
				})
				if f := n.Event.GetTaskFailed(); f != nil {
					assert.Contains(t, f.Error, fmt.Sprintf("gave up after %d answers failed validation", tc.retries+1))
					break
				}
				retries++
				require.LessOrEqual(t, retries, tc.retries, "more retries than the budget")
				b.waitSlotsFree()
			}
			assert.Equal(t, tc.retries, retries)
		})
	}
}
