package remote

import (
	"context"
	"errors"
	"time"

	"fano/gateway"
	"fano/pb"
)

// callOf is req as it crosses to a host.
func callOf(ledger string, intent, call uint64, backend string, req gateway.Request) *pb.RemoteCall {
	m := &pb.RemoteCall{
		Ledger: ledger, Intent: intent, Call: call, Backend: backend,
		TaskId: req.TaskID, Module: req.Module, TaskType: req.TaskType, Prompt: req.Prompt,
		Images: req.Images, DeepMode: req.DeepMode, ConversationUrl: req.ConversationURL,
		KnownAnswers: int32(req.KnownAnswers), Interrupted: req.Interrupted,
	}
	for _, h := range req.History {
		m.History = append(m.History, &pb.Message{Role: h.Role, Content: h.Content})
	}
	return m
}

// requestOf is the gateway.Request a host's backend is sent for m.
func requestOf(m *pb.RemoteCall) gateway.Request {
	r := gateway.Request{
		TaskID: m.TaskId, Module: m.Module, TaskType: m.TaskType, Prompt: m.Prompt, Images: m.Images,
		DeepMode: m.DeepMode, ConversationURL: m.ConversationUrl, KnownAnswers: int(m.KnownAnswers),
		Interrupted: m.Interrupted, IntentSeq: m.Intent,
	}
	for _, h := range m.History {
		r.History = append(r.History, gateway.Message{Role: h.Role, Content: h.Content})
	}
	return r
}

// addressedOf is the report, crossing back before the answer, that the
// new conversation of call m has the address url.
func addressedOf(m *pb.RemoteCall, url string) *pb.RemoteConversationAddressed {
	return &pb.RemoteConversationAddressed{Intent: m.Intent, Call: m.Call, Backend: m.Backend, Url: url}
}

// answerOf is a backend's outcome as it crosses back.
func answerOf(m *pb.RemoteCall, resp gateway.Response, err error) *pb.RemoteAnswer {
	a := &pb.RemoteAnswer{Intent: m.Intent, Call: m.Call, Backend: m.Backend}
	if err != nil {
		a.Error = errorOf(err)
		return a
	}
	a.Content, a.ConversationUrl, a.PrimedTurns, a.FromPage = resp.Content, resp.ConversationURL, int32(resp.PrimedTurns), resp.FromPage
	a.Ended, a.Incomplete, a.Model, a.DurationNs = string(resp.Ended), resp.Incomplete, resp.Model, int64(resp.Duration)
	a.PromptTokens, a.CompletionTokens = resp.PromptTokens, resp.CompletionTokens
	return a
}

// responseOf reads an answer back into what the backend returned.
func responseOf(a *pb.RemoteAnswer) (gateway.Response, error) {
	if a.Error != nil {
		return gateway.Response{}, errorFrom(a.Backend, a.Error)
	}
	return gateway.Response{
		Content: a.Content, ConversationURL: a.ConversationUrl, PrimedTurns: int(a.PrimedTurns), FromPage: a.FromPage,
		Ended: gateway.Ending(a.Ended), Incomplete: a.Incomplete, Model: a.Model, Duration: time.Duration(a.DurationNs),
		PromptTokens: a.PromptTokens, CompletionTokens: a.CompletionTokens,
	}, nil
}

func errorOf(err error) *pb.RemoteError {
	w := &pb.RemoteError{Kind: gateway.Kind(err), Message: err.Error(), NotSent: errors.Is(err, gateway.ErrNotSent)}
	var f *gateway.Fault
	var rl *gateway.RateLimitedError
	switch {
	case errors.As(err, &f):
		w.State, w.Reason, w.Window = string(f.Condition.State), f.Condition.Reason, f.Window
		w.UntilUnixNs = unixNanos(f.Condition.Until)
	case errors.As(err, &rl):
		w.RetryAfterNs, w.UntilUnixNs, w.Cap, w.Reason = int64(rl.RetryAfter), unixNanos(rl.Until), rl.Cap, rl.Reason
	}
	return w
}

// kinds are the sentinels gateway.Kind names, by name.
var kinds = map[string]error{
	"transient": gateway.ErrTransient, "permanent": gateway.ErrPermanent, "unavailable": gateway.ErrUnavailable,
	"credentials": gateway.ErrCredentials, "bad_answer": gateway.ErrBadAnswer, "hung": gateway.ErrHung,
	"conversation_gone": gateway.ErrConversationGone, "cancelled": context.Canceled,
}

// errorFrom rebuilds a host's error so that the orchestrator routes it as
// the host's backend meant: the same kind, condition and times.
func errorFrom(backend string, w *pb.RemoteError) error {
	base := &wireError{msg: w.Message, kind: kinds[w.Kind], notSent: w.NotSent}
	if base.kind == nil {
		base.kind = gateway.ErrPermanent
	}
	switch {
	case w.State != "":
		return &gateway.Fault{Backend: backend, Window: w.Window, NotSent: w.NotSent, Err: base,
			Condition: gateway.Condition{State: gateway.State(w.State), Reason: w.Reason, Until: fromUnixNanos(w.UntilUnixNs)}}
	case w.Kind == "rate_limited":
		return &gateway.RateLimitedError{Backend: backend, RetryAfter: time.Duration(w.RetryAfterNs),
			Until: fromUnixNanos(w.UntilUnixNs), Cap: w.Cap, Reason: w.Reason, NotSent: w.NotSent}
	}
	return base
}

// wireError is a host's error of one kind, with its message as the host
// wrote it.
type wireError struct {
	msg     string
	kind    error
	notSent bool
}

func (e *wireError) Error() string { return e.msg }

func (e *wireError) Is(target error) bool {
	return target == e.kind || (target == gateway.ErrNotSent && e.notSent)
}

func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
