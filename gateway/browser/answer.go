package browser

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/playwright-community/playwright-go"

	"fano/gateway"
)

// answerRead is an answer as read from the page and how it ended: only
// EndComplete (the profile's completion signal was seen, or, for a
// profile without one, the generating signal gone and the text stable)
// may be recorded; the gateway host checks it (gateway.Whole).
type answerRead struct {
	Text  string
	Ended gateway.Ending
	// Why says how an answer that is not complete ended.
	Why string
	// Stopped: fano stopped the answer (it stalled); reading the page
	// again cannot complete it.
	Stopped bool
}

// waitAnswer waits until the new answer (the one after the first before
// answers) ends, and says how:
//
//   - complete: the profile's complete signal follows it; for a profile
//     without one, the generating signal is gone and the text has been
//     stable for the profile's stable time;
//   - cut: a profile with a complete signal saw the generating signal go
//     and the text stay unchanged for the stable time without it (the
//     stream ended early); or the answer stalled (its text did not grow
//     for max_stall_seconds while the site still generated) or ran past
//     max_answer_seconds, and was stopped, keeping what the page shows;
//   - error turn: the site ended it with its error (profile error_turn);
//     staleError is the error-turn text the page showed before the
//     prompt was sent, which is not this answer's.
//
// It reads the page again at each change of the page (or every poll
// interval), so a signal is seen within milliseconds. An answer that
// never started, a stall with nothing on the page, or a page that went
// away is gateway.ErrHung; a page that needs a person (login, a bot
// check) or a limit notice is the backend's fault.
func (b *Backend) waitAnswer(ctx context.Context, page playwright.Page, before int, deep bool, staleError string) (answerRead, error) {
	var none answerRead
	sel := b.p.Selectors
	sent := time.Now()
	stallAfter := b.p.maxStall()
	if deep {
		// Deep modes think for minutes before the text grows.
		stallAfter = min(b.p.maxAnswer(), deepStallFactor*stallAfter)
	}
	var (
		started     bool
		last        string
		grewAt      = sent // when the text last changed
		stableSince time.Time
		quietSince  time.Time // generation ended with an empty answer
	)
	for {
		if ctx.Err() != nil {
			b.abandon(ctx, page)
			return none, b.ctxErr(ctx, "waiting for the answer")
		}
		st, err := b.readSoft(ctx, page)
		if err != nil {
			if ctx.Err() != nil { // closed or cancelled: not the page's fault
				b.dropPage()
				return none, b.ctxErr(ctx, "waiting for the answer")
			}
			if isClosed(page) || errors.Is(err, playwright.ErrTargetClosed) {
				return none, b.pageGone(err)
			}
			return none, b.fail(ctx, "reading the answer", err)
		}
		b.lastURL = st.URL
		now := time.Now()
		if st.Answers > before || st.Generating {
			started = true
		}
		v := b.p.recognise(st, b.judged(false))
		switch v.Row {
		case rowChallenge, rowLoginWall, rowLoginURL:
			return none, b.personFault(v, true)
		case rowErrorTurn:
			if started || st.ErrorTurn != staleError {
				b.log.Warn().Str("event", "gateway.browser.error_turn").Int("chars", len(strings.TrimSpace(st.Text))).Msg(v.Condition.Reason)
				return answerRead{Text: strings.TrimSpace(st.Text), Ended: gateway.EndErrorTurn, Why: v.Condition.Reason}, nil
			}
		}
		if started {
			b.noteAddress(st.URL)
		}
		if st.Banner != "" {
			if err := b.onNotice(st.Banner, !st.Generating && st.Answers <= before, true); err != nil {
				b.abandon(ctx, page)
				return none, err
			}
		}
		if st.Text != last {
			last, grewAt = st.Text, now
		}
		answered := st.Answers > before
		text := strings.TrimSpace(st.Text)
		switch {
		case !started:
			if now.Sub(sent) > b.p.startTimeout() {
				b.stopAnswer(page)
				b.dropPage()
				why := fmt.Sprintf("never started: no answer began within %s of sending (selectors.answer %q found no new answer, selectors.generating %q never showed)",
					b.p.startTimeout(), sel.Answer, sel.Generating)
				b.setCondition(gateway.Condition{State: gateway.StateStalled, Reason: why, Until: b.clock.Now().Add(b.cfg.RecheckInterval)})
				return none, gateway.Classified(b.name, gateway.ErrHung, "%s", why)
			}
		case now.Sub(sent) > b.p.maxAnswer():
			return b.stalled(ctx, page, before, st, fmt.Sprintf("still answering after %s (max_answer_seconds) at %d chars", b.p.maxAnswer(), len(text)))
		case st.Generating && now.Sub(grewAt) > stallAfter:
			return b.stalled(ctx, page, before, st, fmt.Sprintf("stalled at %d chars for %s", len(text), now.Sub(grewAt).Round(time.Second)))
		case answered && st.Done && !st.Generating && text != "":
			return answerRead{Text: b.finalText(ctx, page, st.Text), Ended: gateway.EndComplete}, nil
		case st.Generating || !answered:
			stableSince, quietSince = time.Time{}, time.Time{}
		case text == "":
			if quietSince.IsZero() {
				quietSince = now
			} else if now.Sub(quietSince) > b.p.startTimeout() {
				b.dropPage()
				return none, gateway.Transient(b.name, "empty answer (selectors.answer %q)", sel.Answer)
			}
		case stableSince.IsZero() || grewAt.After(stableSince):
			stableSince = now
		case now.Sub(stableSince) >= b.p.stable():
			if b.p.Complete.Empty() {
				// The profile knows no completion signal: stable text
				// without the generating signal is the only end there is.
				return answerRead{Text: b.finalText(ctx, page, st.Text), Ended: gateway.EndComplete}, nil
			}
			why := fmt.Sprintf("the answer stopped at %d chars without the site's completion signal (complete %q)", len(text), b.p.Complete.String())
			return answerRead{Text: text, Ended: gateway.EndCut, Why: why}, nil
		}
		if err := b.waitChange(ctx, page); err != nil {
			b.abandon(ctx, page)
			return none, b.ctxErr(ctx, "waiting for the answer")
		}
	}
}

// settle finishes an answer that did not end complete, as far as the page
// allows: an error turn is asked again with the site's own Retry control
// (error_turn.retry_button, at most error_turn.retries times); an answer
// cut without its completion signal is read again from its conversation
// (reloaded: a site that finished the answer on its side shows it whole,
// with its signal), once. What is still not complete after that is
// returned as it ended, never as complete.
func (b *Backend) settle(ctx context.Context, page playwright.Page, req gateway.Request, before int, r answerRead) (answerRead, error) {
	retried, reread := 0, false
	for {
		var err error
		switch {
		case r.Ended == gateway.EndErrorTurn && retried < b.p.ErrorTurn.Retries && !b.p.ErrorTurn.Retry.Empty():
			retried++
			var clicked bool
			if clicked, err = b.retryTurn(ctx, page); err != nil || !clicked {
				return r, err
			}
			b.log.Info().Str("event", "gateway.browser.retry_clicked").Str("task", req.TaskID).Int("retry", retried).Msg("clicked the site's Retry on an error turn")
			r, err = b.waitAnswer(ctx, page, before, req.DeepMode, "")
		case r.Ended == gateway.EndCut && !r.Stopped && !reread:
			reread = true
			where := page.URL()
			if b.p.isPendingURL(where) || strings.TrimSuffix(where, "/") == strings.TrimSuffix(b.p.StartURL, "/") {
				return r, nil // no address of its own to read it again from
			}
			b.log.Info().Str("event", "gateway.browser.reread").Str("task", req.TaskID).Str("reason", r.Why).Msg("answer cut; reading it again from the page")
			if err = b.goTo(ctx, page, where); err != nil {
				return answerRead{}, b.fail(ctx, "reloading the conversation to read a cut answer", err)
			}
			r, err = b.waitAnswer(ctx, page, before, req.DeepMode, "")
		default:
			return r, nil
		}
		if err != nil {
			return r, err
		}
	}
}

// retryJS marks the site's Retry control of the last answer (the first
// visible match of error_turn.retry_button in, around or after it whose
// text holds the profile's text) with data-fano-retry, so that Playwright
// clicks it like a person; it returns whether there was one.
const retryJS = `(a) => {
  for (const el of document.querySelectorAll('[data-fano-retry]')) el.removeAttribute('data-fano-retry');
  const q = (sel) => { try { return Array.from(document.querySelectorAll(sel)); } catch (e) { return []; } };
  let last = null;
  for (const sel of a.answer) { const els = q(sel); if (els.length) { last = els[els.length - 1]; break; } }
  const ofLast = (el) => !last || el.contains(last) || last.contains(el) ||
    (last.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING) !== 0;
  const visible = (el) => {
    const st = getComputedStyle(el);
    if (st.display === 'none' || st.visibility === 'hidden') return false;
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0;
  };
  const want = (a.text || '').toLowerCase();
  for (const sel of a.css) {
    for (const el of q(sel)) {
      if (!visible(el) || !ofLast(el)) continue;
      const t = (el.innerText || el.textContent || el.getAttribute('aria-label') || '').toLowerCase();
      if (want && !t.includes(want) && !(el.getAttribute('aria-label') || '').toLowerCase().includes(want)) continue;
      el.setAttribute('data-fano-retry', '');
      return true;
    }
  }
  return false;
}`

// retryTurn clicks the site's Retry control of the failed answer and waits
// until the site took the retry (the control left the page, or the error
// turn is gone). false: the turn
// shows no such control, or the error stayed for the start timeout.
func (b *Backend) retryTurn(ctx context.Context, page playwright.Page) (bool, error) {
	t := b.p.ErrorTurn.Retry
	var raw any
	err := b.evaluate(ctx, page, retryJS, map[string]any{"answer": b.p.Selectors.Answer.js(), "css": t.CSS.js(), "text": t.Text}, &raw)
	if err != nil {
		return false, b.fail(ctx, "finding error_turn.retry_button", err)
	}
	if found, _ := raw.(bool); !found {
		b.log.Warn().Str("event", "gateway.browser.no_retry_control").Str("retry_button", t.CSS.String()).Msg("the error turn shows no Retry control")
		return false, nil
	}
	if err := b.do(ctx, func() error {
		return page.Locator("[data-fano-retry]").First().Click(playwright.LocatorClickOptions{Timeout: b.actionMS()})
	}); err != nil {
		return false, b.fail(ctx, fmt.Sprintf("clicking error_turn.retry_button %q", t.CSS), err)
	}
	deadline := time.Now().Add(b.p.startTimeout())
	for {
		// The site took the retry once the control fano clicked has left
		// the page (the failed turn was replaced) or the error is gone. The
		// first alone can be missed: a retry that fails again at once
		// shows a new error turn before a slow reading sees the gap.
		var gone any
		if err := b.evaluate(ctx, page, `() => !document.querySelector('[data-fano-retry]')`, nil, &gone); err != nil {
			return false, b.fail(ctx, "reading the page after Retry", err)
		}
		if g, _ := gone.(bool); g {
			return true, nil
		}
		st, err := b.readSoft(ctx, page)
		if err != nil {
			return false, b.fail(ctx, "reading the page after Retry", err)
		}
		if !b.p.isErrorTurn(st.ErrorTurn) {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		if err := b.waitChange(ctx, page); err != nil {
			return false, b.ctxErr(ctx, "waiting for the site to take the retry")
		}
	}
}

//go:embed copy.js
var copyJS string

// finalText is the complete answer: text as read, or, with answer_text
// copy:<selector>, what the site's copy button gives (its markdown),
// falling back to text when the button gives nothing.
func (b *Backend) finalText(ctx context.Context, page playwright.Page, text string) string {
	text = strings.TrimSpace(text)
	how, button, _ := answerReader(b.p.AnswerText)
	if how != "copy" {
		return text
	}
	var raw any
	err := b.do(ctx, func() (err error) {
		raw, err = page.Evaluate(copyJS, map[string]any{"answer": b.p.Selectors.Answer.js(), "button": button})
		return err
	})
	if md, ok := raw.(string); err == nil && ok && strings.TrimSpace(md) != "" {
		return strings.TrimSpace(md)
	}
	b.log.Warn().Str("event", "gateway.browser.copy_failed").Str("button", button).AnErr("error", err).
		Msg("the copy button gave nothing; using the answer's text")
	return text
}

// deepStallFactor stretches max_stall_seconds for deep-mode answers.
const deepStallFactor = 10

// stalled stops a hung answer and keeps what the page shows, as a cut
// answer; with nothing there it is gateway.ErrHung naming what was seen.
// Either way the page is dropped and the backend is free for the next
// request at once.
func (b *Backend) stalled(ctx context.Context, page playwright.Page, before int, st pageState, why string) (answerRead, error) {
	b.log.Warn().Str("event", "gateway.browser.stalled").Str("reason", why).Msg("answer hung; stopping it")
	b.stopAnswer(page)
	if final, err := b.readSoft(ctx, page); err == nil && final.Answers == st.Answers {
		st = final
	}
	b.dropPage()
	b.setCondition(gateway.Condition{State: gateway.StateStalled, Reason: why, Until: b.clock.Now().Add(b.cfg.RecheckInterval)})
	if text := strings.TrimSpace(st.Text); st.Answers > before && text != "" {
		return answerRead{Text: text, Ended: gateway.EndCut, Why: why, Stopped: true}, nil
	}
	return answerRead{}, gateway.Classified(b.name, gateway.ErrHung, "%s", why)
}
