package app

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"fano/config"
	"fano/gateway"
	"fano/gateway/browser"
)

// The browser backend type: a real Chromium on a chat web site, described
// by a site profile (built in: chatgpt, gemini, claude; more or patched
// ones from the config's site_profiles_file).

// browserStartTimeout bounds a browser backend's start-up check (launch,
// start page, selectors) when fano starts.
const browserStartTimeout = 2 * time.Minute

// newBrowserBackend builds a browser backend. A bad site profile (file,
// unknown name) fails fano's start with an error naming the file, line and
// field; a site that does not match its profile, a login wall or a missing
// Chromium only marks this backend unavailable (its Health and Send say
// why) and the rest of fano runs.
func newBrowserBackend(name string, b *config.Backend, env *backendEnv) (gateway.Backend, error) {
	bc, err := BrowserConfig(name, b, env.Cfg, env.DataDir)
	if err != nil {
		return nil, err
	}
	bc.Clock = env.Clock
	bc.Logger = env.Logger
	ctx, cancel := context.WithTimeout(context.Background(), browserStartTimeout)
	defer cancel()
	return browser.New(ctx, bc)
}

// BrowserConfig turns a config backend into a browser.Config (shared by
// the factory, the preflight and `fano login`).
func BrowserConfig(name string, b *config.Backend, cfg *config.Config, dataDir string) (browser.Config, error) {
	opts := b.Browser
	if opts == nil {
		opts = config.NewBackend(config.TypeBrowser).Browser
	}
	profiles, err := browser.LoadProfiles(cfg.SiteProfilesFile)
	if err != nil {
		return browser.Config{}, err
	}
	profileName := opts.Profile
	if profileName == "" {
		profileName = name
	}
	p, ok := profiles[profileName]
	if !ok {
		return browser.Config{}, fmt.Errorf("browser.profile: unknown site profile %q (known: %s; add your own in site_profiles_file)",
			profileName, strings.Join(browser.Names(profiles), ", "))
	}
	return browser.Config{
		Name:                 name,
		Profile:              p,
		ProfileDir:           browser.ProfileDir(dataDir, name),
		Headless:             opts.Headless,
		Executable:           os.Getenv("FANO_CHROMIUM"), // default /usr/bin/chromium
		RecycleAfterRequests: opts.RecycleAfterRequests,
		RecycleAfter:         time.Duration(opts.RecycleAfterHours) * time.Hour,
		RequestTimeout:       time.Duration(opts.TimeoutSeconds) * time.Second,
		RecycleAboveBytes:    int64(opts.RecycleAboveMB) << 20,
		PrimeTurns:           primeTurns(opts.PrimeTurns),
		AcceptDegraded:       opts.AcceptDegraded,
	}, nil
}

// primeTurns maps the config's prime_turns (0 = none) to
// browser.Config.PrimeTurns (negative = none, 0 = the default).
func primeTurns(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}
