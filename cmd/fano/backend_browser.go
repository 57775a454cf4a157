package main

import (
	"fmt"
	"sort"
	"strings"

	fanoapp "fano/app"
	"fano/config"
	"fano/gateway/browser"
)

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

// browserConfig is fanoapp.BrowserConfig (`fano config validate` checks
// site profiles with it).
func browserConfig(name string, b *config.Backend, cfg *config.Config, dataDir string) (browser.Config, error) {
	return fanoapp.BrowserConfig(name, b, cfg, dataDir)
}
