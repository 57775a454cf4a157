package browser

import (
	"slices"
	"strings"
	"time"

	"fano/gateway"
)

// Notice kinds: what a visible notice (rate_limit.banner) means.
const (
	// NoticeCap: a usage cap of the subscription ("until Jul 19, 3:12 PM",
	// "your 5-hour limit ... resets at 5:00 PM MDT on Sep 9").
	NoticeCap = "cap"
	// NoticeRate: a short rate limit ("try again in 2 minutes", "too many
	// requests, wait a few minutes").
	NoticeRate = "rate"
	// NoticeDegraded: the site keeps answering, with another model
	// ("Responses will use another model until your limit resets").
	NoticeDegraded = "degraded"
	// NoticeTransient: the notice is an ordinary error; a retry may work.
	NoticeTransient = "transient"
	// NoticeConversationFull: the conversation reached the site's length
	// limit ("start a new conversation"). Asked again there it fails the
	// same way: the task goes on in a new conversation. In a new
	// conversation it is the prompt itself that is too long.
	NoticeConversationFull = "conversation_full"
)

// Notice is what a visible notice says, read with the profile's patterns.
type Notice struct {
	// Kind is one of the Notice* kinds. A container whose text matches no
	// pattern is NoticeTransient: the container also holds ordinary errors.
	Kind string
	// Until is the absolute time the notice names (zero if none).
	Until time.Time
	// RetryAfter is the wait the notice names, relative to now (for Until
	// too: Until - now, at least 0). 0: no time given.
	RetryAfter time.Duration
	// Model is the model the notice names (named group "model"), if any.
	Model string
	// Reason quotes the notice (truncated) for logs and status.
	Reason string
}

// ClassifyNotice reads a notice's text with the profile's patterns. now is
// the wall clock in the time zone the site shows its times in (the
// browser's, normally the machine's local zone); a time zone named in the
// text ("5:00 PM MDT") wins.
func (p *Profile) ClassifyNotice(text string, now time.Time) Notice {
	text = strings.Join(strings.Fields(text), " ")
	n := Notice{Kind: NoticeTransient, Reason: "notice: " + truncate(text, 200)}
	for _, pt := range p.RateLimit.Patterns {
		m := pt.re.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		n.Kind = pt.kind()
		if i := pt.re.SubexpIndex("model"); i >= 0 {
			n.Model = strings.TrimSpace(m[i])
		}
		switch pt.Retry {
		case RetryAbsolute:
			if at, ok := parseReset(m[pt.re.SubexpIndex("time")], now); ok {
				n.Until = at
				n.RetryAfter = max(at.Sub(now), 0)
			} else {
				n.Reason += " (could not read its time; waiting for the next window)"
			}
		case RetryRelative:
			if d, ok := parseRelative(m[pt.re.SubexpIndex("in")]); ok {
				n.RetryAfter = d
			} else {
				n.Reason += " (could not read its duration; waiting for the next window)"
			}
		}
		return n
	}
	return n
}

// BannerRetry is ClassifyNotice's wait and reason (0: no time given).
func (p *Profile) BannerRetry(text string, now time.Time) (time.Duration, string) {
	n := p.ClassifyNotice(text, now)
	return n.RetryAfter, n.Reason
}

// noticeOutcome is what a visible notice means for the request in hand.
type noticeOutcome struct {
	err   error  // stop the request with this error
	model string // the site answers with another model; record this
}

// classifyNotice decides what a visible notice (rate_limit.banner) means
// for a request of taskType. The page-state table reads it: its rate and
// cap rows stop the request with a *gateway.Fault in that condition, until
// the time the notice names (wrapping the *gateway.RateLimitedError it is
// routed by). A degraded notice is accepted (the model is recorded) for
// task types in Config.AcceptDegraded and is a cap until the named time
// otherwise; anything else in a notice container is an ordinary error:
// transient once the prompt was sent and nothing is being written
// (answering), ignored while a page loads. sent: the prompt left (a notice
// before that costs no quota).
func (b *Backend) classifyNotice(text, taskType string, answering, sent bool) noticeOutcome {
	v := b.p.recognise(pageState{Banner: text}, b.judged(false))
	n := v.Notice
	ev := b.log.Info().Str("event", "gateway.browser.notice").Str("kind", n.Kind).Str("reason", n.Reason)
	if !n.Until.IsZero() {
		ev = ev.Time("until", n.Until)
	}
	ev.Dur("retry_after", n.RetryAfter).Msg("site notice")
	limit := func(c gateway.Condition) noticeOutcome {
		rl := &gateway.RateLimitedError{Backend: b.name, Cap: c.State == gateway.StateCapped, Until: n.Until, RetryAfter: n.RetryAfter, Reason: c.Reason}
		return noticeOutcome{err: &gateway.Fault{Backend: b.name, Condition: c, NotSent: !sent, Err: rl}}
	}
	switch {
	case n.Kind == NoticeConversationFull:
		return noticeOutcome{err: b.conversationFull(n.Reason)}
	case v.Row == rowRate || v.Row == rowCap:
		return limit(v.Condition)
	case n.Kind == NoticeDegraded:
		if b.acceptsDegraded(taskType) {
			model := "another model"
			if n.Model != "" {
				model = "not " + n.Model
			}
			return noticeOutcome{model: model + " (" + n.Reason + ")"}
		}
		c := noticeCondition(n, b.clock.Now(), b.cfg.RecheckInterval)
		c.Reason += " (the site answers with another model; task type " + taskType + " waits for the limit to reset)"
		return limit(c)
	}
	if !answering {
		return noticeOutcome{}
	}
	return noticeOutcome{err: gateway.Transient(b.name, "the site showed a message that is not a limit (%s)", n.Reason)}
}

// conversationFull is the error of a conversation the site says is full:
// continued, the task starts a new one (primed with its last turns); new,
// the prompt is longer than the site takes, which asking again does not
// change.
func (b *Backend) conversationFull(reason string) error {
	if b.continuing {
		b.dropPage()
		return gateway.Classified(b.name, gateway.ErrConversationGone, "the conversation reached the site's length limit (%s): the task goes on in a new one", reason)
	}
	return gateway.Permanent(b.name, "a new conversation refused the prompt as too long (%s)", reason)
}

// acceptsDegraded says whether a task type takes answers from the site's
// fallback model.
func (b *Backend) acceptsDegraded(taskType string) bool {
	return slices.Contains(b.cfg.AcceptDegraded, "*") || (taskType != "" && slices.Contains(b.cfg.AcceptDegraded, taskType))
}
