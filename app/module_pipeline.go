package app

import (
	"errors"
	"fmt"
	"path/filepath"

	"fano/config"
	"fano/modules"
	"fano/modules/pipeline"
)

// newPipelineModule builds the pipeline of a run directory from the copy
// of its definition kept there (pipeline.SaveRun). A data directory that
// is no pipeline run has none; one whose definition or items cannot be
// read is named in Wiring's unbuilt modules with why.
func newPipelineModule(env *moduleEnv) (modules.Module, error) {
	if !pipeline.IsRunDir(env.DataDir) {
		return nil, notBuilt{fmt.Sprintf("%s has no %s (not a pipeline run directory)", env.DataDir, pipeline.SnapshotFile)}
	}
	def, _, err := pipeline.LoadRun(env.DataDir)
	if err != nil {
		return nil, notBuilt{err.Error()}
	}
	items, err := def.LoadItems()
	if err != nil {
		return nil, notBuilt{fmt.Sprintf("pipeline %s: items: %v", def.Name, err)}
	}
	return pipeline.New(pipeline.Config{Def: def, Items: items}), nil
}

// notBuilt: a module the registry knows is not built here, and why.
type notBuilt struct{ why string }

func (n notBuilt) Error() string { return n.why }

// PipelineConfig is the fano config a pipeline runs on: configPath if
// set, else the definition's config: (relative to its file), else the
// built-in simulated models. The math modules stay off: a pipeline run
// is the pipeline alone. dataDir "" is runs/<name>.
func PipelineConfig(def *pipeline.Definition, configPath, dataDir string) (*config.Config, error) {
	var cfg *config.Config
	var err error
	switch {
	case configPath != "":
		cfg, err = config.Load(configPath)
	case def.Config != "":
		p := def.Config
		if !filepath.IsAbs(p) {
			p = filepath.Join(def.Dir, p)
		}
		cfg, err = config.Load(p)
	default:
		cfg, err = config.Parse(pipeline.DefaultFanoConfig, "built-in pipeline config")
	}
	if err != nil {
		return nil, err
	}
	cfg.Explorer.Enabled, cfg.Documenter.Enabled, cfg.Researcher.Enabled = false, false, false
	// The module keeps a window of tasks queued ahead of the running ones
	// by design: a queue that deep is not a health problem.
	if d := &cfg.Orchestrator.Health.MaxQueueDepth; *d > 0 && *d < pipeline.DefaultWindow+cfg.Orchestrator.Scheduler.MaxRunningTasks {
		*d = pipeline.DefaultWindow + cfg.Orchestrator.Scheduler.MaxRunningTasks
	}
	cfg.DataDir = dataDir
	if cfg.DataDir == "" {
		cfg.DataDir = filepath.Join("runs", def.Name)
	}
	if err := def.CheckModels(cfg.EnabledBackends()); err != nil {
		return nil, err
	}
	return cfg, nil
}

// RunDirConfig is the config of the pipeline run in dataDir, found from
// the run directory alone (its definition's origin), or with configPath
// in its place when set. ok is false when dataDir is no pipeline run.
func RunDirConfig(dataDir, configPath string) (cfg *config.Config, ok bool, err error) {
	def, origin, err := pipeline.LoadRun(dataDir)
	if errors.Is(err, pipeline.ErrNoRun) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	if configPath == "" {
		configPath = origin.Config
	}
	cfg, err = PipelineConfig(def, configPath, dataDir)
	return cfg, true, err
}
