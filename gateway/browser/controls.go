package browser

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/playwright-community/playwright-go"

	"fano/gateway"
)

// stepReading is one reading of a control's element (deepmode.js).
type stepReading struct {
	Found bool  `json:"found"`
	State *bool `json:"state"`
	On    bool  `json:"on"`
	Shown bool  `json:"shown"`
	Guard bool  `json:"guard"`
}

// controlState is what is known of a control's state: on, off, or unknown.
type controlState int

const (
	stateUnknown controlState = iota
	stateOn
	stateOff
)

func stateOf(on bool) controlState {
	if on {
		return stateOn
	}
	return stateOff
}

func (s controlState) String() string {
	return [...]string{"unknown", "on", "off"}[s]
}

// pageDriver is what walking a control needs from a page; the backend and
// `fano profile check` both provide it.
type pageDriver struct {
	page    playwright.Page
	poll    time.Duration
	timeout time.Duration // for one step to show and one click
	// do runs a blocking Playwright call bound to ctx.
	do func(ctx context.Context, fn func() error) error
}

// readStep finds t (marking it for a click) and reads the control's signals.
func (d *pageDriver) readStep(ctx context.Context, c *Control, t Target) (stepReading, error) {
	arg := map[string]any{"target": t.js(), "mark": "1", "on": c.On.js(), "shown": c.Shown.js()}
	if len(c.Steps) > 0 {
		arg["guard"] = c.Steps[0].js()
	} else {
		arg["guard"] = c.Item.js()
	}
	var r stepReading
	var raw any
	if err := d.do(ctx, func() (err error) { raw, err = d.page.Evaluate(deepModeJS, arg); return err }); err != nil {
		return r, err
	}
	err := remarshal(raw, &r)
	return r, err
}

// waitStep waits until t shows (marking it), at most d.timeout.
func (d *pageDriver) waitStep(ctx context.Context, c *Control, t Target) (stepReading, error) {
	deadline := time.Now().Add(d.timeout)
	for {
		r, err := d.readStep(ctx, c, t)
		if err != nil || r.Found {
			return r, err
		}
		if time.Now().After(deadline) {
			return r, nil
		}
		if err := sleepCtx(ctx, d.poll); err != nil {
			return r, err
		}
	}
}

// clickMarked clicks the element readStep marked.
func (d *pageDriver) clickMarked(ctx context.Context) error {
	return d.do(ctx, func() error {
		return d.page.Locator("[data-fano-target='1']").First().Click(playwright.LocatorClickOptions{Timeout: playwright.Float(float64(d.timeout.Milliseconds()))})
	})
}

// closedState reads a control without opening anything: its Shown signal,
// trusted while the control's first step shows; a control without steps
// is read from its item.
func (d *pageDriver) closedState(ctx context.Context, c *Control) (controlState, error) {
	if len(c.Steps) == 0 {
		r, err := d.readStep(ctx, c, c.Item)
		if err != nil || !r.Found {
			return stateUnknown, err
		}
		return itemState(c, r), nil
	}
	if c.Shown.Empty() {
		return stateUnknown, nil
	}
	r, err := d.readStep(ctx, c, c.Steps[0])
	if err != nil || !r.Found {
		return stateUnknown, err
	}
	return stateOf(r.Shown), nil
}

// itemState reads the state of the item found in r.
func itemState(c *Control, r stepReading) controlState {
	switch {
	case !c.On.Empty():
		return stateOf(r.On)
	case r.State != nil:
		return stateOf(*r.State)
	case !c.Shown.Empty():
		return stateOf(r.Shown)
	}
	return stateUnknown
}

// stepError says which step of which control failed.
type stepError struct {
	Control string
	Step    string // "steps[0]", "item", ...
	Target  Target
	Why     string
}

func (e *stepError) Error() string {
	return fmt.Sprintf("controls.%s.%s %s %s", e.Control, e.Step, e.Target, e.Why)
}

// open clicks the control's steps in order, each once it shows.
func (d *pageDriver) open(ctx context.Context, name string, c *Control) error {
	for i, st := range c.Steps {
		r, err := d.waitStep(ctx, c, st)
		if err != nil {
			return err
		}
		if !r.Found {
			return &stepError{name, fmt.Sprintf("steps[%d]", i), st, fmt.Sprintf("did not show within %s", d.timeout)}
		}
		if err := d.clickMarked(ctx); err != nil {
			return &stepError{name, fmt.Sprintf("steps[%d]", i), st, "could not be clicked: " + err.Error()}
		}
	}
	return nil
}

// closeMenu presses Escape when the control's item still shows.
func (d *pageDriver) closeMenu(ctx context.Context, c *Control) {
	if c.Close == "none" || len(c.Steps) == 0 {
		return
	}
	if r, err := d.readStep(ctx, c, c.Item); err != nil || !r.Found {
		return
	}
	_ = d.do(ctx, func() error { return d.page.Keyboard().Press("Escape") })
}

// set switches control name to want and reads the state back. It returns
// the state it found before (for `fano profile check`).
func (d *pageDriver) set(ctx context.Context, name string, c *Control, want bool) (before controlState, err error) {
	wanted := stateOf(want)
	before, err = d.closedState(ctx, c)
	if err != nil || before == wanted {
		return before, err
	}
	if err := d.open(ctx, name, c); err != nil {
		return before, err
	}
	defer d.closeMenu(ctx, c)
	r, err := d.waitStep(ctx, c, c.Item)
	if err != nil {
		return before, err
	}
	if !r.Found {
		return before, &stepError{name, "item", c.Item, fmt.Sprintf("did not show within %s", d.timeout)}
	}
	now := itemState(c, r)
	if before == stateUnknown {
		before = now
	}
	if now == wanted {
		return before, nil
	}
	if now == stateUnknown {
		return before, &stepError{name, "item", c.Item, "shows no on/off state (set controls." + name + ".on or .shown)"}
	}
	click, step := c.Item, "item"
	if !want && !c.Off.Empty() {
		click, step = c.Off, "off"
		if r, err = d.waitStep(ctx, c, c.Off); err != nil {
			return before, err
		}
		if !r.Found {
			return before, &stepError{name, "off", c.Off, fmt.Sprintf("did not show within %s", d.timeout)}
		}
	}
	if err := d.clickMarked(ctx); err != nil {
		return before, &stepError{name, step, click, "could not be clicked: " + err.Error()}
	}
	// Read it back: from the item while the menu is open, from Shown once
	// it closed, else by opening the menu again.
	deadline := time.Now().Add(d.timeout)
	reopened := false
	for {
		r, err := d.readStep(ctx, c, c.Item)
		if err != nil {
			return before, err
		}
		var got controlState
		switch {
		case r.Found:
			got = itemState(c, r)
		case !c.Shown.Empty() && r.Guard:
			got = stateOf(r.Shown)
		case !reopened && len(c.Steps) > 0:
			reopened = true
			if err := d.open(ctx, name, c); err != nil {
				return before, err
			}
			continue
		}
		if got == wanted {
			return before, nil
		}
		if time.Now().After(deadline) {
			return before, &stepError{name, step, click, fmt.Sprintf("was clicked but the control did not read %s within %s (reads %s)", wanted, d.timeout, got)}
		}
		if err := sleepCtx(ctx, d.poll); err != nil {
			return before, err
		}
	}
}

// driver is the backend's pageDriver for page.
func (b *Backend) driver(page playwright.Page) *pageDriver {
	return &pageDriver{page: page, poll: b.p.poll(), timeout: b.cfg.ActionTimeout, do: b.do}
}

// setControls switches the profile's controls before a prompt: deep mode as
// asked, and every always-on control on. A step that fails is transient
// (a site that changed is named in the error; see fano profile check).
func (b *Backend) setControls(ctx context.Context, page playwright.Page, deep bool) error {
	d := b.driver(page)
	for _, name := range controlNames(b.p) {
		c := b.p.control(name)
		want := c.Always
		if name == "deep_mode" {
			want = deep
		} else if !c.Always {
			continue
		}
		if _, err := d.set(ctx, name, c, want); err != nil {
			if ctx.Err() != nil {
				return b.ctxErr(ctx, "setting controls."+name)
			}
			if _, ok := err.(*stepError); ok && name == "deep_mode" && !want {
				// No deep-mode control on this page: it cannot be on.
				b.log.Debug().Str("event", "gateway.browser.control_absent").Str("control", name).Err(err).Msg("deep mode control not found; it is off")
				continue
			}
			return b.fail(ctx, "setting controls."+name, err)
		}
	}
	return nil
}

// openUpload walks controls.upload (when the profile has one) so that the
// file input appears.
func (b *Backend) openUpload(ctx context.Context, page playwright.Page) error {
	c := b.p.control("upload")
	if c == nil {
		return nil
	}
	if err := b.driver(page).open(ctx, "upload", c); err != nil {
		if ctx.Err() != nil {
			return b.ctxErr(ctx, "opening controls.upload")
		}
		return b.fail(ctx, "opening controls.upload", err)
	}
	return nil
}

// controlNames are the profile's control names, deep_mode first, then
// sorted.
func controlNames(p *Profile) []string {
	var names []string
	for n := range p.Controls {
		if n != "deep_mode" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	if p.control("deep_mode") != nil {
		names = append([]string{"deep_mode"}, names...)
	}
	return names
}

// deepModeFailure is the error for a request asking for deep mode on a
// profile without the control.
func deepModeFailure(backend, taskID, profile string) error {
	return gateway.Permanent(backend, "task %s: deep mode requested but site profile %s has no controls.deep_mode", taskID, profile)
}
