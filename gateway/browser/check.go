package browser

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/playwright-community/playwright-go"
)

// FieldCheck is what `fano profile check` found for one profile field.
type FieldCheck struct {
	Field string // "selectors.prompt", "controls.deep_mode", "login"
	OK    bool
	// Detail says what was found: "found 1 (1st of 3 selectors)", "not
	// found", "state off", "steps[1] did not show".
	Detail string
}

// CheckReport is the result of CheckProfile.
type CheckReport struct {
	Backend, Profile string
	URL              string // the page's address after loading
	Fields           []FieldCheck
	// Problems counts the fields a run needs that failed (login, the
	// startup selectors, invalid CSS, controls).
	Problems int
}

// checkJS counts, per field, the matches of each selector of its list
// (visible ones apart); -1 for a selector that is not valid CSS.
const checkJS = `(sels) => {
  const visible = (el) => {
    const st = getComputedStyle(el);
    if (st.display === 'none' || st.visibility === 'hidden') return false;
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0;
  };
  const out = {};
  for (const [key, list] of Object.entries(sels)) {
    out[key] = list.map((sel) => {
      try {
        const els = Array.from(document.querySelectorAll(sel));
        return { n: els.length, visible: els.filter(visible).length };
      } catch (e) { return { n: -1, visible: 0 }; }
    });
  }
  return out;
}`

type selectorCount struct {
	N       int `json:"n"`
	Visible int `json:"visible"`
}

// CheckProfile opens the backend's site headless on its saved login (the
// profile directory; fano must not be using it), and reports every field
// of the profile: which selectors match on the start page, the login
// state, visible notices and how they read, and each control walked
// through its steps with its state read (nothing is switched and no prompt
// is sent). The report is written to out as it goes.
func CheckProfile(ctx context.Context, cfg Config, out io.Writer) (*CheckReport, error) {
	p := cfg.Profile
	if p == nil {
		return nil, fmt.Errorf("%s: no site profile", cfg.Name)
	}
	if dir, err := filepath.Abs(cfg.ProfileDir); err == nil {
		cfg.ProfileDir = dir
	}
	if cfg.ActionTimeout <= 0 {
		cfg.ActionTimeout = 10 * time.Second
	}
	if err := ensureProfileDir(cfg.ProfileDir); err != nil {
		return nil, fmt.Errorf("%s: browser profile directory %s: %w", cfg.Name, cfg.ProfileDir, err)
	}
	pw, release, err := acquire()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Name, err)
	}
	defer release()
	bc, err := launch(pw, launchOptions{Executable: cfg.Executable, ProfileDir: cfg.ProfileDir, Headless: true, ExtraArgs: cfg.ExtraArgs, Timeout: time.Minute})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Name, err)
	}
	defer func() { _ = bc.Close() }()
	page, err := bc.NewPage()
	if err != nil {
		return nil, fmt.Errorf("%s: opening a page: %w", cfg.Name, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = page.Close() })
	defer stop()

	r := &CheckReport{Backend: cfg.Name, Profile: p.Name}
	fmt.Fprintf(out, "fano profile check: backend %s, site profile %s, %s\n", cfg.Name, p.Name, time.Now().UTC().Format(time.RFC3339))
	if _, err := page.Goto(p.StartURL, playwright.PageGotoOptions{
		WaitUntil: playwright.WaitUntilStateDomcontentloaded,
		Timeout:   playwright.Float(float64(p.loadTimeout().Milliseconds())),
	}); err != nil {
		return nil, fmt.Errorf("%s: start page %s did not load: %w", cfg.Name, p.StartURL, err)
	}
	st, err := waitShown(ctx, p, page)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	r.URL = page.URL()
	fmt.Fprintf(out, "start_url %s: loaded %s\n", p.StartURL, r.URL)
	if ua, err := page.Evaluate("navigator.userAgent"); err == nil {
		fmt.Fprintf(out, "browser: %v\n", ua)
	}
	add := func(f FieldCheck, counts bool) {
		r.Fields = append(r.Fields, f)
		mark := "ok     "
		if !f.OK {
			mark = "absent "
			if counts {
				r.Problems++
				mark = "PROBLEM"
			}
		}
		fmt.Fprintf(out, "  %s %-26s %s\n", mark, f.Field, f.Detail)
	}

	// Login.
	switch {
	case p.isChallenge(st):
		add(FieldCheck{"login", false, fmt.Sprintf("the site shows a bot check (%q, challenge.markers) instead of the chat; pass it with fano login %s", st.Title, cfg.Name)}, true)
	case st.Login:
		add(FieldCheck{"login", false, fmt.Sprintf("the login wall shows (selectors.login_wall %q); run fano login %s", p.Selectors.LoginWall.String(), cfg.Name)}, true)
	case p.isLoginURL(r.URL):
		add(FieldCheck{"login", false, fmt.Sprintf("the site sent the browser to its login page (login_url %q); run fano login %s", p.LoginURL, cfg.Name)}, true)
	case st.Prompt && !p.Selectors.LoggedIn.Empty() && !st.LoggedIn:
		add(FieldCheck{"login", false, fmt.Sprintf("guest mode: the composer shows but selectors.logged_in %q does not; run fano login %s", p.Selectors.LoggedIn.String(), cfg.Name)}, true)
	case !st.Prompt:
		add(FieldCheck{"login", false, "neither the prompt input nor a login wall showed"}, true)
	default:
		how := "the prompt input shows and no login wall"
		if !p.Selectors.LoggedIn.Empty() {
			how = "selectors.logged_in shows"
		}
		add(FieldCheck{"login", true, "logged in (" + how + ")"}, true)
	}

	// Selectors on the start page.
	sels := profileSelectors(p)
	counts, err := checkCounts(page, sels)
	if err != nil {
		return nil, fmt.Errorf("%s: reading the page: %w", cfg.Name, err)
	}
	for _, k := range sortedKeys(sels) {
		needed := false
		for _, f := range p.StartupCheck {
			needed = needed || k == "selectors."+f
		}
		f, invalid := describeCounts(k, sels[k], counts[k])
		add(f, needed || invalid)
	}

	// Notices.
	if st.Banner != "" {
		n := p.ClassifyNotice(st.Banner, time.Now())
		detail := "a notice shows, read as " + n.Kind
		if !n.Until.IsZero() {
			detail += " until " + n.Until.Format(time.RFC1123)
		} else if n.RetryAfter > 0 {
			detail += " for " + n.RetryAfter.String()
		}
		add(FieldCheck{"rate_limit.notice", true, detail + ": " + n.Reason}, false)
	}

	// Controls, walked without switching anything.
	d := &pageDriver{page: page, poll: p.poll(), timeout: cfg.ActionTimeout, do: func(ctx context.Context, fn func() error) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn()
	}}
	for _, name := range controlNames(p) {
		c := p.control(name)
		detail, ok := walkControl(ctx, d, name, c)
		if name == "upload" && ok && !p.Selectors.FileInput.Empty() {
			if n, err := checkCounts(page, map[string]SelectorList{"f": p.Selectors.FileInput}); err == nil {
				f, _ := describeCounts("", p.Selectors.FileInput, n["f"])
				detail += "; then selectors.file_input " + f.Detail
				ok = f.OK
			}
		}
		add(FieldCheck{"controls." + name, ok, detail}, true)
	}
	fmt.Fprintf(out, "%d problem(s). \"absent\" is normal on a start page for what shows only while chatting\n"+
		"(answer, generating, stop, send, login_wall, notices, error_turn, challenge markers; file_input behind an upload menu).\n", r.Problems)
	return r, ctx.Err()
}

func checkCounts(page playwright.Page, sels map[string]SelectorList) (map[string][]selectorCount, error) {
	arg := map[string]any{}
	for k, v := range sels {
		arg[k] = v.js()
	}
	raw, err := page.Evaluate(checkJS, arg)
	if err != nil {
		return nil, err
	}
	out := map[string][]selectorCount{}
	err = remarshal(raw, &out)
	return out, err
}

// describeCounts says which selector of a list matched; invalid is true
// when one is not valid CSS.
func describeCounts(field string, list SelectorList, counts []selectorCount) (f FieldCheck, invalid bool) {
	f.Field = field
	for i, c := range counts {
		if c.N < 0 {
			f.Detail = fmt.Sprintf("invalid CSS: %q", list[i])
			return f, true
		}
	}
	for i, c := range counts {
		if c.N > 0 {
			f.OK = true
			f.Detail = fmt.Sprintf("found %d (%d visible) with %q", c.N, c.Visible, list[i])
			if len(list) > 1 {
				f.Detail += fmt.Sprintf(", selector %d of %d", i+1, len(list))
			}
			return f, false
		}
	}
	f.Detail = fmt.Sprintf("not found: %q", list.String())
	return f, false
}

// walkControl opens a control's menu, reads its item's state and closes
// the menu again, describing each step.
func walkControl(ctx context.Context, d *pageDriver, name string, c *Control) (string, bool) {
	var parts []string
	if before, err := d.closedState(ctx, c); err == nil && before != stateUnknown {
		parts = append(parts, "reads "+before.String()+" with the menu closed")
	}
	for i, st := range c.Steps {
		r, err := d.waitStep(ctx, c, st)
		if err != nil || !r.Found {
			return strings.Join(append(parts, fmt.Sprintf("steps[%d] %s did not show", i, st)), "; "), false
		}
		if err := d.clickMarked(ctx); err != nil {
			return strings.Join(append(parts, fmt.Sprintf("steps[%d] %s could not be clicked: %v", i, st, err)), "; "), false
		}
		parts = append(parts, fmt.Sprintf("steps[%d] clicked", i))
	}
	if c.Item.Empty() {
		return strings.Join(parts, "; "), true
	}
	r, err := d.waitStep(ctx, c, c.Item)
	if err != nil || !r.Found {
		d.closeMenu(ctx, c)
		return strings.Join(append(parts, fmt.Sprintf("item %s did not show", c.Item)), "; "), false
	}
	state := itemState(c, r)
	parts = append(parts, "item found, state "+state.String())
	if !c.Off.Empty() {
		if r, err := d.readStep(ctx, c, c.Off); err != nil || !r.Found {
			parts = append(parts, fmt.Sprintf("off %s not found", c.Off))
			d.closeMenu(ctx, c)
			return strings.Join(parts, "; "), false
		}
		parts = append(parts, "off found")
	}
	d.closeMenu(ctx, c)
	return strings.Join(parts, "; "), state != stateUnknown
}
