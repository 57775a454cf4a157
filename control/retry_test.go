package control

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/pb"
)

// POST /api/orchestrator/retry requeues FAILED tasks with fresh budgets;
// it needs the token and refuses a task that is not FAILED, naming it.
func TestRetryFailedTasks(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	assert.Equal(t, http.StatusUnauthorized, f.do("POST", "/api/orchestrator/retry", "", `{"failed":true}`).code)
	r := f.do("POST", "/api/orchestrator/retry", testToken, `{}`)
	assert.Equal(t, http.StatusBadRequest, r.code)
	r = f.do("POST", "/api/orchestrator/retry", testToken, `{"ids":["`+q0+`"]}`)
	assert.Equal(t, http.StatusBadRequest, r.code)
	assert.Contains(t, string(r.body), q0)
	assert.Contains(t, string(r.body), "not FAILED")

	// q0's next request is wrong in itself: the task fails.
	f.backend.Inject(func(_ context.Context, req gateway.Request) error {
		if req.TaskID != q0 {
			return nil
		}
		return gateway.Permanent("simA", "HTTP 400")
	})
	f.drive("q0 failed", func() bool { return f.state(q0) == pb.TaskState_TASK_STATE_FAILED })
	f.backend.Inject(nil)
	r = f.do("POST", "/api/orchestrator/retry", testToken, `{"failed":true,"module":"probe"}`)
	require.Equal(t, http.StatusOK, r.code, string(r.body))
	var res RetryResult
	require.NoError(t, json.Unmarshal(r.body, &res))
	assert.Equal(t, []string{q0}, res.Requeued)
	assert.NotEqual(t, pb.TaskState_TASK_STATE_FAILED, f.state(q0))
}
