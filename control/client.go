package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client talks to a running panel: the CLI's `fano tasks`, `cancel`,
// `seed add`, `comment add`. It is safe for concurrent use.
type Client struct {
	BaseURL string // http://127.0.0.1:8765
	Token   string // needed for changes only
	HTTP    *http.Client
}

// APIError is an error answer of the panel.
type APIError struct {
	Status  int
	Message string
	body    []byte // the answer as sent (Healthz reads a 503's body)
}

func (e *APIError) Error() string { return e.Message }

// ErrNotRunning wraps the error of a panel that does not answer.
var ErrNotRunning = errors.New("no control panel answers")

// BaseURL turns a listen address into the URL a client on this machine
// uses: an unspecified host (":8765", "0.0.0.0:8765") becomes 127.0.0.1.
func BaseURL(addr string) (string, error) {
	scheme := "http://"
	if rest, ok := strings.CutPrefix(addr, "https://"); ok {
		// A panel served over TLS (control.allow_remote) writes its
		// address with the scheme.
		scheme, addr = "https://", rest
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("panel address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if ip != nil && ip.To4() == nil {
			host = "::1"
		} else {
			host = "127.0.0.1"
		}
	}
	return scheme + net.JoinHostPort(host, port), nil
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 30 * time.Second}
}

// do sends a request and decodes a JSON answer into out (nil: discard).
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.BaseURL, "/")+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if method != http.MethodGet && c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return fmt.Errorf("%w at %s: %v", ErrNotRunning, c.BaseURL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var e apiError
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return &APIError{Status: resp.StatusCode, Message: e.Error, body: data}
		}
		return &APIError{Status: resp.StatusCode, Message: fmt.Sprintf("%s %s: %s", method, path, resp.Status), body: data}
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = append((*raw)[:0], data...)
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// Healthz asks whether a panel answers, and for which data directory.
func (c *Client) Healthz(ctx context.Context) (Healthz, error) {
	var h Healthz
	err := c.do(ctx, http.MethodGet, "/healthz", nil, &h)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusServiceUnavailable {
		// A fano that cannot work (WAL writes fail, low disk) answers
		// 503 with its data directory and the reason: it is running.
		if json.Unmarshal(apiErr.body, &h) == nil && h.Service == "fano" {
			return h, nil
		}
		return Healthz{Status: "unhealthy", Service: "fano", Reason: apiErr.Message}, nil
	}
	if err == nil && h.Service != "fano" {
		return h, fmt.Errorf("%w at %s: something else answers there", ErrNotRunning, c.BaseURL)
	}
	return h, err
}

// Status returns the orchestrator's status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var s Status
	return s, c.do(ctx, http.MethodGet, "/api/orchestrator/status", nil, &s)
}

// Tasks lists tasks, newest first; empty module/state and limit 0 mean
// any and the server's default.
func (c *Client) Tasks(ctx context.Context, module, state string, limit int) ([]TaskView, error) {
	q := url.Values{}
	if module != "" {
		q.Set("module", module)
	}
	if state != "" {
		q.Set("state", state)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/api/orchestrator/tasks"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out []TaskView
	return out, c.do(ctx, http.MethodGet, path, nil, &out)
}

// Task returns one task with its conversation.
func (c *Client) Task(ctx context.Context, id string) (TaskView, error) {
	var t TaskView
	return t, c.do(ctx, http.MethodGet, "/api/orchestrator/task/"+url.PathEscape(id), nil, &t)
}

// Cancel cancels a waiting or running task.
func (c *Client) Cancel(ctx context.Context, id, reason string) (CancelResult, error) {
	var r CancelResult
	return r, c.do(ctx, http.MethodPost, "/api/orchestrator/task/"+url.PathEscape(id)+"/cancel", cancelRequest{Reason: reason}, &r)
}

// AddSeed gives the explorer a new question.
func (c *Client) AddSeed(ctx context.Context, text string, priority int) (CommandResult, error) {
	var r CommandResult
	return r, c.do(ctx, http.MethodPost, "/api/seeds", seedRequest{Text: text, Priority: priority}, &r)
}

// Backup asks the running fano to back up its WAL now.
func (c *Client) Backup(ctx context.Context) (BackupResult, error) {
	var r BackupResult
	return r, c.do(ctx, http.MethodPost, "/api/wal/backup", nil, &r)
}

// AddComment comments on a document section.
func (c *Client) AddComment(ctx context.Context, sectionID, text string) (CommandResult, error) {
	var r CommandResult
	return r, c.do(ctx, http.MethodPost, "/api/comments", commentRequest{SectionID: sectionID, Text: text}, &r)
}

// PauseBackend pauses (pause) or resumes a backend.
func (c *Client) PauseBackend(ctx context.Context, name, reason string, pause bool) (BackendResult, error) {
	var r BackendResult
	if pause {
		return r, c.do(ctx, http.MethodPost, "/api/backends/"+url.PathEscape(name)+"/pause", pauseRequest{Reason: reason}, &r)
	}
	return r, c.do(ctx, http.MethodPost, "/api/backends/"+url.PathEscape(name)+"/resume", nil, &r)
}
