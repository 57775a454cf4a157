package control

import (
	"context"
	"errors"
	"net/http"

	"fano/actors"
)

// retryRequest is POST /api/orchestrator/retry: the FAILED tasks to put
// back in the queue — the ids given, or with failed set every FAILED
// task (of module, if given).
type retryRequest struct {
	IDs    []string `json:"ids,omitempty"`
	Failed bool     `json:"failed,omitempty"`
	Module string   `json:"module,omitempty"`
}

// RetryResult lists the tasks requeued.
type RetryResult struct {
	Requeued []string `json:"requeued"`
}

func (s *Server) handleRetry(w http.ResponseWriter, r *http.Request) {
	var req retryRequest
	if err := decodeBody(w, r, &req, false); err != nil {
		writeError(w, http.StatusBadRequest, "retry: %v", err)
		return
	}
	if len(req.IDs) == 0 && !req.Failed {
		writeError(w, http.StatusBadRequest, "retry: name task ids, or set failed to retry every FAILED task")
		return
	}
	if len(req.IDs) > 0 && (req.Failed || req.Module != "") {
		writeError(w, http.StatusBadRequest, "retry: give task ids or failed (with an optional module), not both")
		return
	}
	ids, err := s.sys.Retry(req.IDs, req.Module)
	var re *actors.RetryError
	switch {
	case errors.As(err, &re):
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, "retry: %v", err)
		return
	}
	if ids == nil {
		ids = []string{}
	}
	s.logger.Info().Str("event", "control.panel.retried").Strs("tasks", ids).Msg("failed tasks requeued")
	writeJSON(w, http.StatusOK, RetryResult{Requeued: ids})
}

// Retry requeues FAILED tasks: ids, or every FAILED one (of module) when
// failed is set.
func (c *Client) Retry(ctx context.Context, ids []string, failed bool, module string) (RetryResult, error) {
	var r RetryResult
	return r, c.do(ctx, http.MethodPost, "/api/orchestrator/retry", retryRequest{IDs: ids, Failed: failed, Module: module}, &r)
}
