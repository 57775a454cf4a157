package browser

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/playwright-community/playwright-go"
)

// Login opens a browser window (headed) on cfg's profile directory at the
// site's start page, so that a person can log in once; the profile keeps
// the login for the backend. It returns when the person closes the window,
// presses Enter on in, or ctx ends (ctrl-C). When the page is still open
// at that point, it checks for the login wall and says whether the login
// worked. Needs a display ($DISPLAY or $WAYLAND_DISPLAY).
func Login(ctx context.Context, cfg Config, in io.Reader, out io.Writer) error {
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return fmt.Errorf("%s: fano login opens a browser window and needs a display, but neither DISPLAY nor WAYLAND_DISPLAY is set; "+
			"run it in a desktop session or over ssh -X (or log in on a desktop machine and copy %s here)", cfg.Name, cfg.ProfileDir)
	}
	return login(ctx, cfg, in, out, false)
}

// login is Login; tests run it headless.
func login(ctx context.Context, cfg Config, in io.Reader, out io.Writer, headless bool) error {
	if cfg.Profile == nil {
		return fmt.Errorf("%s: no site profile", cfg.Name)
	}
	if dir, err := filepath.Abs(cfg.ProfileDir); err == nil {
		cfg.ProfileDir = dir // Chromium wants an absolute path
	}
	if err := ensureProfileDir(cfg.ProfileDir); err != nil {
		return fmt.Errorf("%s: browser profile directory %s: %w", cfg.Name, cfg.ProfileDir, err)
	}
	pw, release, err := acquire()
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.Name, err)
	}
	defer release()
	bc, err := launch(pw, launchOptions{
		Executable: cfg.Executable, ProfileDir: cfg.ProfileDir, Headless: headless, ExtraArgs: cfg.ExtraArgs,
	})
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.Name, err)
	}
	closed := make(chan struct{})
	bc.OnClose(func(playwright.BrowserContext) { close(closed) })
	defer func() { _ = bc.Close() }()

	var page playwright.Page
	if pages := bc.Pages(); len(pages) > 0 {
		page = pages[0]
	} else if page, err = bc.NewPage(); err != nil {
		return fmt.Errorf("%s: opening a page: %w", cfg.Name, err)
	}
	watchClose(page)
	if _, err := page.Goto(cfg.Profile.StartURL, playwright.PageGotoOptions{
		WaitUntil: playwright.WaitUntilStateDomcontentloaded,
		Timeout:   playwright.Float(float64(cfg.Profile.loadTimeout().Milliseconds())),
	}); err != nil {
		fmt.Fprintf(out, "Could not open %s (%v); open it yourself in the window.\n", cfg.Profile.StartURL, err)
	}
	fmt.Fprintf(out, "A browser window shows %s for backend %s (profile %s).\n"+
		"Log in there. If the site shows a bot check (\"Just a moment...\"), pass it there too.\n"+
		"Then close the window, or press Enter here, and fano keeps the login.\n",
		cfg.Profile.StartURL, cfg.Name, cfg.ProfileDir)

	enter := make(chan struct{})
	go func() { // ends with the process if nobody presses Enter
		_, _ = bufio.NewReader(in).ReadString('\n')
		close(enter)
	}()
	select {
	case <-closed:
		fmt.Fprintf(out, "Browser closed; the profile keeps the login. Check it with `fano run` (backend %s reports \"login required\" if not).\n", cfg.Name)
		return nil
	case <-ctx.Done():
		fmt.Fprintln(out, "Interrupted; closing the browser (the profile keeps whatever login was made).")
		return nil
	case <-enter:
	}
	// The page is still open: see whether the site still wants a login.
	if isClosed(page) {
		if pages := bc.Pages(); len(pages) > 0 {
			page = pages[0]
		} else {
			return nil
		}
	}
	p := cfg.Profile
	if !p.Selectors.LoginWall.Empty() || !p.Selectors.LoggedIn.Empty() || len(p.loginURL) > 0 {
		if _, err := page.Goto(p.StartURL, playwright.PageGotoOptions{
			WaitUntil: playwright.WaitUntilStateDomcontentloaded,
			Timeout:   playwright.Float(float64(p.loadTimeout().Milliseconds())),
		}); err == nil {
			st, err := waitShown(ctx, p, page)
			switch {
			case p.isChallenge(st):
				return fmt.Errorf("%s: %s still shows a bot check (%q) instead of the chat; run fano login %s again and pass the check in the window",
					cfg.Name, p.StartURL, st.Title, cfg.Name)
			case err == nil && (st.Login || p.isLoginURL(st.URL)):
				return fmt.Errorf("%s: still logged out: %s shows its login page (selectors.login_wall %q, login_url %q); run fano login %s again",
					cfg.Name, p.StartURL, p.Selectors.LoginWall.String(), p.LoginURL, cfg.Name)
			case st.Prompt && !st.LoggedIn && !p.Selectors.LoggedIn.Empty():
				return fmt.Errorf("%s: still logged out: %s is usable as a guest but shows no login (selectors.logged_in %q); run fano login %s again and sign in",
					cfg.Name, p.StartURL, p.Selectors.LoggedIn.String(), cfg.Name)
			}
		}
	}
	fmt.Fprintf(out, "Logged in: backend %s can use the profile now.\n", cfg.Name)
	return nil
}

// waitShown reads the page until it shows the login wall or a login page,
// or the prompt input with the sign of a login (when the profile has one),
// or the load timeout passes (the last reading is returned then).
func waitShown(ctx context.Context, p *Profile, page playwright.Page) (pageState, error) {
	ctx, cancel := context.WithTimeout(ctx, p.loadTimeout())
	defer cancel()
	for {
		var st pageState
		raw, err := page.Evaluate(pollJS, pollArg(p))
		if err == nil {
			err = remarshal(raw, &st)
		}
		if err != nil && !isNavigating(err) {
			return st, err
		}
		if err == nil && (st.Login || p.isLoginURL(st.URL) || st.Prompt && (st.LoggedIn || p.Selectors.LoggedIn.Empty())) {
			return st, nil
		}
		if err := sleepCtx(ctx, p.poll()); err != nil {
			if st.Prompt {
				return st, nil // a guest page: the caller decides
			}
			return st, errors.New("the page showed neither the prompt input nor the login wall")
		}
	}
}
