package browser

import (
	"slices"

	"fano/gateway"
)

// noticeOutcome is what a visible notice means for the request in hand.
type noticeOutcome struct {
	err   error  // stop the request with this error
	model string // the site answers with another model; record this
}

// classifyNotice decides what a visible notice (rate_limit.banner) means
// for a request of taskType: a usage cap or rate limit stops it with a
// *gateway.RateLimitedError (Cap true with the named time for a cap, Cap
// false with the wait for a rate limit); a degraded notice is accepted
// (the model is recorded) for task types in Config.AcceptDegraded and is a
// cap until the named time otherwise; anything else in a notice container
// is an ordinary error: transient once the prompt was sent and nothing is
// being written (answering), ignored while a page loads.
func (b *Backend) classifyNotice(text, taskType string, answering bool) noticeOutcome {
	n := b.p.ClassifyNotice(text, b.clock.Now())
	ev := b.log.Info().Str("event", "gateway.browser.notice").Str("kind", n.Kind).Str("reason", n.Reason)
	if !n.Until.IsZero() {
		ev = ev.Time("until", n.Until)
	}
	ev.Dur("retry_after", n.RetryAfter).Msg("site notice")
	switch n.Kind {
	case NoticeCap:
		return noticeOutcome{err: &gateway.RateLimitedError{Backend: b.name, Cap: true, Until: n.Until, RetryAfter: n.RetryAfter, Reason: n.Reason}}
	case NoticeRate:
		return noticeOutcome{err: &gateway.RateLimitedError{Backend: b.name, RetryAfter: n.RetryAfter, Until: n.Until, Reason: n.Reason}}
	case NoticeDegraded:
		if b.acceptsDegraded(taskType) {
			model := "another model"
			if n.Model != "" {
				model = "not " + n.Model
			}
			return noticeOutcome{model: model + " (" + n.Reason + ")"}
		}
		return noticeOutcome{err: &gateway.RateLimitedError{Backend: b.name, Cap: true, Until: n.Until, RetryAfter: n.RetryAfter,
			Reason: n.Reason + " (the site answers with another model; task type " + taskType + " waits for the limit to reset)"}}
	}
	if !answering {
		return noticeOutcome{}
	}
	return noticeOutcome{err: gateway.Transient(b.name, "the site showed a message that is not a limit (%s)", n.Reason)}
}

// acceptsDegraded says whether a task type takes answers from the site's
// fallback model.
func (b *Backend) acceptsDegraded(taskType string) bool {
	return slices.Contains(b.cfg.AcceptDegraded, "*") || (taskType != "" && slices.Contains(b.cfg.AcceptDegraded, taskType))
}
