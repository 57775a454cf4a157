package browser

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/playwright-community/playwright-go"

	"fano/gateway"
)

// pollArg is poll.js's argument for profile p.
func pollArg(p *Profile) map[string]any {
	s := p.Selectors
	how, attr, _ := answerReader(p.AnswerText)
	return map[string]any{
		"answer": s.Answer.js(), "generating": s.Generating.js(), "prompt": s.Prompt.js(),
		"login": s.LoginWall.js(), "logged_in": s.LoggedIn.js(), "banner": p.RateLimit.Banner.js(),
		"complete": p.Complete.js(), "gone": p.ConversationGone.js(), "how": how, "attr": attr,
		"challenge": p.Challenge.Markers.js(), "error_in": p.ErrorTurn.In.js(),
	}
}

// profileSelectors are every selector list of p by its field path
// ("selectors.prompt", "rate_limit.banner", "controls.upload.steps[0]").
func profileSelectors(p *Profile) map[string]SelectorList {
	all := map[string]SelectorList{}
	for _, f := range selectorFields {
		if sel := p.Selectors.selector(f); !sel.Empty() {
			all["selectors."+f] = sel
		}
	}
	if !p.RateLimit.Banner.Empty() {
		all["rate_limit.banner"] = p.RateLimit.Banner
	}
	if !p.Challenge.Markers.Empty() {
		all["challenge.markers"] = p.Challenge.Markers
	}
	if !p.ErrorTurn.In.Empty() {
		all["error_turn.in"] = p.ErrorTurn.In
	}
	if !p.ErrorTurn.Retry.Empty() {
		all["error_turn.retry_button"] = p.ErrorTurn.Retry.CSS
	}
	return all
}

// controlSelectors are the selector lists of p's controls by field path
// ("controls.deep_mode.steps[0]", "controls.deep_mode.item").
func controlSelectors(p *Profile) map[string]SelectorList {
	all := map[string]SelectorList{}
	for name, c := range p.Controls {
		if c == nil {
			continue
		}
		at := "controls." + name
		for i, st := range c.Steps {
			all[fmt.Sprintf("%s.steps[%d]", at, i)] = st.CSS
		}
		for k, t := range map[string]Target{"item": c.Item, "off": c.Off, "shown": c.Shown} {
			if !t.Empty() {
				all[at+"."+k] = t.CSS
			}
		}
		if !c.On.Empty() {
			all[at+".on"] = c.On
		}
	}
	return all
}

// pickJS returns the index of the first selector of a list with a visible
// match (or, when visible is false, with any match); -1 if none.
const pickJS = `(a) => {
  const visible = (el) => {
    const st = getComputedStyle(el);
    if (st.display === 'none' || st.visibility === 'hidden') return false;
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0;
  };
  for (let i = 0; i < a.list.length; i++) {
    let els = [];
    try { els = Array.from(document.querySelectorAll(a.list[i])); } catch (e) { continue; }
    if (els.some((el) => !a.visible || visible(el))) return i;
  }
  return -1;
}`

// locate is a locator for list tried in order: the first selector with a
// (visible) match now; if none matches yet, any of them (Playwright waits
// for one). Runs on the page, so call it inside b.do.
func (b *Backend) locate(page playwright.Page, list SelectorList, visible bool) playwright.Locator {
	suffix := ""
	if visible {
		suffix = " >> visible=true"
	}
	if len(list) > 1 {
		raw, err := page.Evaluate(pickJS, map[string]any{"list": list.js(), "visible": visible})
		i := -1
		switch v := raw.(type) {
		case int:
			i = v
		case float64:
			i = int(v)
		}
		if err == nil && i >= 0 && i < len(list) {
			return page.Locator(list[i] + suffix).First()
		}
	}
	loc := page.Locator(list[0] + suffix)
	for _, sel := range list[1:] {
		loc = loc.Or(page.Locator(sel + suffix))
	}
	return loc.First()
}

// personFault puts the backend in the condition a page that needs a
// person shows (a login wall, guest mode, a bot check) and returns it as
// the request's fault: the browser is closed, so that `fano login` can
// open the profile, and the backend checks the site again every
// RecheckInterval. sent: the prompt had left (a page seen before that
// costs no quota).
func (b *Backend) personFault(v pageVerdict, sent bool) error {
	c := v.Condition
	if a := gateway.Action(c.State, b.name); a != "" {
		c.Reason += "; " + a
	}
	c.Until = b.clock.Now().Add(b.cfg.RecheckInterval)
	b.log.Warn().Str("event", "gateway.browser."+v.Row).Str("state", string(c.State)).Msg(c.Reason)
	_ = b.closeBrowser()
	return b.setDownAs(c.State, &gateway.Fault{Backend: b.name, Condition: c, NotSent: !sent})
}

// onNotice handles a visible notice during the current request: an error
// ends the request, a degraded model is recorded and the request goes on.
func (b *Backend) onNotice(text string, answering, sent bool) error {
	if text == b.noticeAccepted {
		return nil // read and accepted at an earlier poll
	}
	o := b.classifyNotice(text, b.taskType, answering, sent)
	if o.err == nil {
		b.noticeAccepted = text
	}
	if c, ok := gateway.ConditionOf(o.err); ok {
		b.setCondition(c)
	}
	if o.model != "" {
		b.degraded = o.model
	}
	return o.err
}

// evaluate runs a page script; a page that is navigating (a site's
// redirect to its login page) destroys the script's context, so it is
// read again on the new page, a few times at most.
func (b *Backend) evaluate(ctx context.Context, page playwright.Page, js string, arg any, out *any) error {
	for attempt := 0; ; attempt++ {
		err := b.do(ctx, func() (err error) { *out, err = page.Evaluate(js, arg); return err })
		if err == nil || attempt >= 5 || !isNavigating(err) {
			return err
		}
		if err := sleepCtx(ctx, b.p.poll()); err != nil {
			return err
		}
	}
}

func isNavigating(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Execution context was destroyed") || strings.Contains(msg, "navigation")
}

// settledURL is the page's conversation address once it is no interim one
// (profile pending_url); "" when it stays interim for the load timeout.
func (b *Backend) settledURL(ctx context.Context, page playwright.Page) string {
	deadline := time.Now().Add(b.p.loadTimeout())
	for {
		u := page.URL()
		if !b.p.isPendingURL(u) {
			return u
		}
		if time.Now().After(deadline) || sleepCtx(ctx, b.p.poll()) != nil {
			b.log.Warn().Str("event", "gateway.browser.pending_url").Str("url", u).Msg("the conversation kept an interim address; not stored")
			return ""
		}
	}
}

// noteAddress tells the current request's caller the address of its new
// conversation, once: the first reading, after the answer began, whose
// URL is neither interim (profile pending_url) nor the start page. Until
// then a request interrupted by a stop has no page to be read from.
func (b *Backend) noteAddress(u string) {
	if b.addressed == nil || u == "" || b.p.isPendingURL(u) ||
		strings.TrimSuffix(u, "/") == strings.TrimSuffix(b.p.StartURL, "/") {
		return
	}
	tell := b.addressed
	b.addressed = nil
	b.log.Debug().Str("event", "gateway.browser.addressed").Str("url", u).Msg("the new conversation has its address")
	tell(u)
}
