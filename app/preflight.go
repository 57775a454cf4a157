package app

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"fano/config"
	"fano/gateway/browser"
)

// preflight checks what can refuse a start and needs no open WAL: for
// browser backends, that their site profile loads and names a known
// profile and that the Playwright driver is installed. Main.Open calls
// it before it opens the WAL, so a refused start writes nothing. With
// realBrowsers false (backends built by Options.NewBackend) the browser
// checks are left out: no browser is started.
func preflight(cfg *config.Config, realBrowsers bool) error {
	// A key variable unset at start is a mistake to fix now, before
	// anything is written (a key that stops working later parks its
	// backend in the credentials state instead, and fano goes on).
	if unset := cfg.UnsetKeyVariables(); len(unset) > 0 {
		return fmt.Errorf("%s: set it (or put it in llm.env_file) and start again", strings.Join(unset, "; "))
	}
	names := cfg.EnabledBackends()
	sort.Strings(names)
	for _, name := range names {
		b, _ := cfg.Backend(name)
		if b.Type != config.TypeBrowser || !realBrowsers || b.Host != "" {
			continue
		}
		if _, err := BrowserConfig(name, b, cfg, cfg.DataDir); err != nil {
			return fmt.Errorf("backend %s: %w", name, err)
		}
		dir := browser.DriverDir()
		if ents, err := os.ReadDir(dir); err != nil || len(ents) == 0 {
			return fmt.Errorf("backend %s: the Playwright driver is not installed in %s: run `make deps`, or set PLAYWRIGHT_DRIVER_PATH", name, dir)
		}
	}
	return nil
}
