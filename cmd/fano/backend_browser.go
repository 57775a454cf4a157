package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"fano/config"
	"fano/gateway"
	"fano/gateway/browser"
)

// The browser backend type: a real Chromium on a chat web site, described
// by a site profile (built in: chatgpt, gemini, claude; more or patched
// ones from the config's site_profiles_file).
func init() {
	backendFactories[config.TypeBrowser] = newBrowserBackend
}

// browserStartTimeout bounds a browser backend's start-up check (launch,
// start page, selectors) when fano starts.
const browserStartTimeout = 2 * time.Minute

// newBrowserBackend builds a browser backend. A bad site profile (file,
// unknown name) fails fano's start with an error naming the file, line and
// field; a site that does not match its profile, a login wall or a missing
// Chromium only marks this backend unavailable (its Health and Send say
// why) and the rest of fano runs.
func newBrowserBackend(name string, b *config.Backend, env *backendEnv) (gateway.Backend, error) {
	bc, err := browserConfig(name, b, env.Cfg, env.DataDir)
	if err != nil {
		return nil, err
	}
	bc.Clock = env.Clock
	bc.Logger = env.Logger
	ctx, cancel := context.WithTimeout(context.Background(), browserStartTimeout)
	defer cancel()
	return browser.New(ctx, bc)
}

// browserBackendConfig is the browser.Config of the browser backend name,
// for the command what (`fano login`, `fano profile check`) that works on
// its profile outside a run: the config loaded and its data directory
// checked. A name that is no browser backend is refused with the list of
// those there are; onlyBrowsers says what only they do ("log in").
func browserBackendConfig(g *globals, what, name, onlyBrowsers string) (browser.Config, error) {
	cfg, err := loadConfig(g)
	if err != nil {
		return browser.Config{}, err
	}
	b, ok := cfg.Backend(name)
	if !ok || b.Type != config.TypeBrowser {
		var names []string
		for n, nb := range cfg.Backends {
			if nb != nil && nb.Type == config.TypeBrowser {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		list := "none"
		if len(names) > 0 {
			list = strings.Join(names, ", ")
		}
		if !ok {
			return browser.Config{}, fmt.Errorf("%s: no backend %q in the config (browser backends: %s)", what, name, list)
		}
		return browser.Config{}, fmt.Errorf("%s: backend %s is of type %s; only browser backends %s (browser backends: %s)", what, name, b.Type, onlyBrowsers, list)
	}
	if err := config.CheckDataDir(cfg.DataDir); err != nil {
		return browser.Config{}, err
	}
	bc, err := browserConfig(name, b, cfg, cfg.DataDir)
	if err != nil {
		return browser.Config{}, fmt.Errorf("backend %s: %w", name, err)
	}
	return bc, nil
}

// browserConfig turns a config backend into a browser.Config (shared by
// the factory and `fano login`).
func browserConfig(name string, b *config.Backend, cfg *config.Config, dataDir string) (browser.Config, error) {
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
