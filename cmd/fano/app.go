package main

import (
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"fano/actors"
	fanoapp "fano/app"
	"fano/config"
	"fano/modules"
	"fano/wal"
)

// app is a data directory opened by a command (fanoapp.Data), under the
// short names the commands use.
type app struct {
	cfg     *config.Config
	dataDir string
	log     *wal.Log
	logger  zerolog.Logger
	data    *fanoapp.Data
	// modules run beside the config's (globals.modules).
	modules func() []modules.Module
}

// readConfig reads --config, or the built-in demo without it.
func readConfig(g *globals) (*config.Config, error) {
	if g.configPath == "" {
		return config.Default(), nil
	}
	return config.Load(g.configPath)
}

// loadConfig reads --config (or the built-in demo) and applies --data-dir.
// A pipeline run directory (--data-dir) is enough: its config is found
// from the definition kept there.
func loadConfig(g *globals) (*config.Config, error) {
	var cfg *config.Config
	var runDir bool
	var err error
	if g.dataDir != "" {
		cfg, runDir, err = fanoapp.RunDirConfig(g.dataDir, g.configPath)
	}
	if !runDir {
		cfg, err = readConfig(g)
	}
	if err != nil {
		return nil, err
	}
	if g.dataDir != "" {
		cfg.DataDir = g.dataDir
	}
	if cfg.DataDir == "" {
		cfg.DataDir = "./fano-data"
	}
	if cfg.LLM.EnvFile != "" {
		if _, err := config.LoadEnvFile(cfg.LLM.EnvFile); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// openApp loads the config, checks the data directory and opens the WAL
// for writing. A locked, damaged or corrupt database is one clear error,
// and nothing is written.
func openApp(g *globals, console string) (*app, error) {
	return openData(g, openOpts{console: console})
}

// openAppReadOnly opens the data directory for a command that only reads
// (status and tasks offline, verify, wal inspect, recover --dry-run): the
// WAL is opened read-only (shared lock, no PID file) and no log file is
// written, so the data directory's bytes stay as they were.
func openAppReadOnly(g *globals) (*app, error) {
	return openData(g, openOpts{console: "off", readOnly: true})
}

// openOpts say how a command opens the data directory.
type openOpts struct {
	console  string // logging.console override ("" = the config's)
	readOnly bool   // see openAppReadOnly
}

func openData(g *globals, o openOpts) (*app, error) {
	cfg, err := loadConfig(g)
	if err != nil {
		return nil, err
	}
	d, err := fanoapp.OpenData(cfg, fanoapp.OpenOptions{Console: o.console, ReadOnly: o.readOnly})
	if err != nil {
		return nil, err
	}
	return wrapData(d, g), nil
}

func wrapData(d *fanoapp.Data, g *globals) *app {
	a := &app{cfg: d.Config, dataDir: d.Dir, log: d.Log, logger: d.Logger, data: d}
	if g != nil {
		a.modules = g.modules
	}
	return a
}

func (a *app) close() error { return a.data.Close() }

// wiring is how the actor system is built for a's data directory.
func (a *app) wiring(clock clockwork.Clock) fanoapp.Wiring {
	w := a.data.Wiring(clock)
	if a.modules != nil {
		w.Modules = a.modules()
	}
	return w
}

// options builds the actor system's options from the config for a
// command that does not run fano (status, verify, repair, recover): its
// backends are stand-ins that start nothing, so such a command never
// launches a browser or touches its profile (a `fano run` starting at
// that moment would find the profile locked).
func (a *app) options(clock clockwork.Clock) (actors.Options, error) {
	w := a.wiring(clock)
	w.NewBackend = fanoapp.OfflineBackend
	return w.ActorOptions()
}
