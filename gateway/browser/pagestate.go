package browser

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"fano/gateway"
)

// Challenge is how a site profile recognises a bot-check page (Cloudflare's
// "Just a moment..."): its title or one of its markers, and no composer.
// Sites load the CDN's scripts on ordinary pages too, so a marker alone is
// not a challenge while the prompt input shows.
type Challenge struct {
	// Title are RE2 regular expressions on the page's title.
	Title []string `yaml:"title"`
	// Markers are CSS selectors of the challenge's markup and scripts
	// (#challenge-running, cf- ids, the challenge platform's script);
	// present counts, visible or not.
	Markers SelectorList `yaml:"markers"`
	// WaitSeconds is how long a challenge may take to clear on its own
	// (an automatic check passes in seconds) before the backend waits for
	// a person; default 10.
	WaitSeconds int `yaml:"wait_seconds"`

	title []*regexp.Regexp
}

// ErrorTurn is how a site profile recognises an answer the site ended with
// an error ("Something went wrong while generating the response.") and
// asks for it again with the site's own control before fano sends the
// prompt anew.
type ErrorTurn struct {
	// In are the containers an error turn shows in (the turn, an error
	// line in it); only those of the last answer count.
	In SelectorList `yaml:"in"`
	// Match are RE2 regular expressions on their text; a match is an
	// error turn.
	Match []string `yaml:"match"`
	// Retry is the site's control in the failed turn that generates the
	// answer again ("Retry").
	Retry Target `yaml:"retry_button"`
	// Retries is how often fano clicks Retry for one prompt before the
	// request fails as transient; default 2, negative: never.
	Retries int `yaml:"retries"`

	match []*regexp.Regexp
}

const (
	defaultChallengeWait    = 10
	defaultErrorTurnRetries = 2
)

func (p *Profile) challengeWait() time.Duration {
	return time.Duration(p.Challenge.WaitSeconds) * time.Second
}

// compilePageStates checks and compiles the challenge and error-turn
// fields; errf builds an error at a field path of the profile.
func (p *Profile) compilePageStates(errf func(field, format string, args ...any) error) []error {
	var errs []error
	compile := func(field string, exprs []string) []*regexp.Regexp {
		var out []*regexp.Regexp
		for i, e := range exprs {
			re, err := regexp.Compile(e)
			switch {
			case strings.TrimSpace(e) == "":
				errs = append(errs, errf(fmt.Sprintf("%s[%d]", field, i), "empty; a regular expression"))
			case err != nil:
				errs = append(errs, errf(fmt.Sprintf("%s[%d]", field, i), "%v", err))
			default:
				out = append(out, re)
			}
		}
		return out
	}
	p.Challenge.title = compile("challenge.title", p.Challenge.Title)
	p.ErrorTurn.match = compile("error_turn.match", p.ErrorTurn.Match)
	if p.Challenge.WaitSeconds < 0 {
		errs = append(errs, errf("challenge.wait_seconds", "must not be negative; is %d", p.Challenge.WaitSeconds))
	}
	if len(p.ErrorTurn.Match) > 0 && p.ErrorTurn.In.Empty() {
		errs = append(errs, errf("error_turn.in", "missing; error_turn.match is matched against the text of the containers this selector finds"))
	}
	if !p.ErrorTurn.Retry.Empty() && len(p.ErrorTurn.Match) == 0 {
		errs = append(errs, errf("error_turn.retry_button", "needs error_turn.match (what an error turn says)"))
	}
	return errs
}

// The rows of the page-state table. Each names one shape of page the
// backend recognises, tried in this order on every reading of the page.
const (
	rowChallenge = "challenge"   // a bot-check page instead of the chat
	rowLoginWall = "login_wall"  // selectors.login_wall shows
	rowLoginURL  = "login_url"   // the page went to a login address
	rowGuest     = "guest"       // a composer but no sign of an account
	rowRate      = "rate_notice" // a notice of a short rate limit
	rowCap       = "cap_notice"  // a notice of a usage cap
	rowErrorTurn = "error_turn"  // the answer ended with the site's error
	rowNone      = ""            // none of these: the page works
)

// pageVerdict is what the page-state table read from one page reading.
type pageVerdict struct {
	Row string
	// Condition is the backend's condition under this page (State ""
	// for an error turn, which is a fault of one answer, not of the
	// backend). Until is decided here, once.
	Condition gateway.Condition
	// Notice is the page's notice (rate_limit.banner) read with the
	// profile's patterns; zero without one.
	Notice Notice
}

// readAt is when and how a page reading is judged.
type readAt struct {
	now time.Time
	// settled: the page had its load time (a login marker may show
	// late, so guest mode is decided only then).
	settled bool
	// recheck ends a limit whose notice names no time.
	recheck time.Duration
}

// pageRow is one row of the table: when a reading shows the shape, and
// the condition it puts the backend in.
type pageRow struct {
	name string
	when func(p *Profile, st pageState, settled bool) bool
	// condition builds the condition; n is the page's notice read with
	// the profile's patterns.
	condition func(p *Profile, st pageState, n Notice, at readAt) gateway.Condition
}

// pageRows is the page-state table.
var pageRows = []pageRow{
	{rowChallenge, func(p *Profile, st pageState, _ bool) bool { return p.isChallenge(st) },
		func(_ *Profile, st pageState, _ Notice, _ readAt) gateway.Condition {
			return gateway.Condition{State: gateway.StateChallenge, Reason: fmt.Sprintf("the site shows a bot check (%q) instead of the chat", st.Title)}
		}},
	{rowLoginWall, func(_ *Profile, st pageState, _ bool) bool { return st.Login },
		func(p *Profile, _ pageState, _ Notice, _ readAt) gateway.Condition {
			return gateway.Condition{State: gateway.StateLogin, Reason: fmt.Sprintf("login required: the site shows its login wall (selectors.login_wall %q)", p.Selectors.LoginWall)}
		}},
	{rowLoginURL, func(p *Profile, st pageState, _ bool) bool { return p.isLoginURL(st.URL) },
		func(p *Profile, st pageState, _ Notice, _ readAt) gateway.Condition {
			return gateway.Condition{State: gateway.StateLogin, Reason: fmt.Sprintf("login required: the site went to its login page %s (login_url %q)", st.URL, p.LoginURL)}
		}},
	{rowGuest, func(p *Profile, st pageState, settled bool) bool {
		return settled && st.Prompt && !st.LoggedIn && !p.Selectors.LoggedIn.Empty()
	}, func(p *Profile, _ pageState, _ Notice, _ readAt) gateway.Condition {
		return gateway.Condition{State: gateway.StateLogin, Reason: fmt.Sprintf("login required: the site is in guest mode (selectors.logged_in %q not shown)", p.Selectors.LoggedIn.String())}
	}},
	{rowRate, func(_ *Profile, st pageState, _ bool) bool { return st.Banner != "" },
		func(_ *Profile, _ pageState, n Notice, at readAt) gateway.Condition {
			return noticeCondition(n, at.now, at.recheck)
		}},
	{rowCap, func(_ *Profile, st pageState, _ bool) bool { return st.Banner != "" },
		func(_ *Profile, _ pageState, n Notice, at readAt) gateway.Condition {
			return noticeCondition(n, at.now, at.recheck)
		}},
	{rowErrorTurn, func(p *Profile, st pageState, _ bool) bool { return p.isErrorTurn(st.ErrorTurn) },
		func(_ *Profile, st pageState, _ Notice, _ readAt) gateway.Condition {
			return gateway.Condition{Reason: "the site ended the answer with an error: " + truncate(strings.Join(strings.Fields(st.ErrorTurn), " "), 200)}
		}},
}

// recognise reads one page reading with the table: the first row that
// matches, or rowNone. A notice row matches only for the kind it names
// (a degraded notice or an ordinary message is no condition of the
// backend; the caller decides what it means for the request).
func (p *Profile) recognise(st pageState, at readAt) pageVerdict {
	var n Notice
	if st.Banner != "" {
		n = p.ClassifyNotice(st.Banner, at.now)
	}
	for _, r := range pageRows {
		if !r.when(p, st, at.settled) {
			continue
		}
		switch {
		case r.name == rowRate && n.Kind != NoticeRate, r.name == rowCap && n.Kind != NoticeCap:
			continue
		}
		return pageVerdict{Row: r.name, Condition: r.condition(p, st, n, at), Notice: n}
	}
	return pageVerdict{Row: rowNone, Notice: n}
}

// isChallenge: the page is a bot check: its title or a marker, and none
// of the chat (no prompt input, no answer, nothing being written).
func (p *Profile) isChallenge(st pageState) bool {
	if st.Prompt || st.Answers > 0 || st.Generating {
		return false
	}
	if st.Challenge {
		return true
	}
	for _, re := range p.Challenge.title {
		if re.MatchString(st.Title) {
			return true
		}
	}
	return false
}

// isErrorTurn: text (the last answer's error-turn containers) says the
// site failed the answer.
func (p *Profile) isErrorTurn(text string) bool {
	if strings.TrimSpace(text) == "" {
		return false
	}
	text = strings.Join(strings.Fields(text), " ")
	for _, re := range p.ErrorTurn.match {
		if re.MatchString(text) {
			return true
		}
	}
	return false
}

// noticeCondition is the backend's condition under a limit notice: rate
// limited (a short limit) or capped (a usage cap) until the time the notice
// names, or for one recheck interval when it names none.
func noticeCondition(n Notice, now time.Time, recheck time.Duration) gateway.Condition {
	c := gateway.Condition{State: gateway.StateRateLimited, Reason: n.Reason, Until: n.Until}
	if n.Kind == NoticeCap || n.Kind == NoticeDegraded {
		c.State = gateway.StateCapped
	}
	switch {
	case !c.Until.IsZero():
	case n.RetryAfter > 0:
		c.Until = now.Add(n.RetryAfter)
	default:
		c.Until = now.Add(recheck)
	}
	return c
}
