package app

import (
	"fano/modules"
	"fano/modules/researcher"
)

// The researcher module: its factory (which reads researcher.sources_dir)
// and its event log. Sections reach it from the documenter and its
// findings reach the explorer as module messages through the actor
// system (actors/moduleflow.go).

const researcherOwner = "module/" + researcher.Name

// newResearcherModule reads the sources. A missing or unreadable sources
// directory, or an unreadable file, is logged as an error naming it and
// kept as a problem (`fano verify` lists it); the researcher runs with the
// sources it could read, and nothing else is affected.
func newResearcherModule(env *moduleEnv) (modules.Module, error) {
	cfg := env.Cfg
	if !cfg.Researcher.Enabled {
		return nil, nil
	}
	dir := cfg.Researcher.SourcesDir
	sources, problems, err := researcher.LoadSources(dir)
	if err != nil {
		problems = append(problems, modules.Problem{Kind: researcher.ProblemSourcesDir, ID: dir, Detail: err.Error()})
	}
	for _, p := range problems {
		env.Logger.Error().Str("event", "modules.researcher.source_problem").Str("kind", p.Kind).Str("path", p.ID).
			Msg(p.Detail)
	}
	rcfg := researcher.Config{
		Sources: sources, Problems: problems, PromptsDir: cfg.Researcher.PromptsDir, MaxRequests: cfg.MaxRequests,
	}
	if env.UntilIdle {
		// A run that ends when idle is bounded: questions from the
		// document's gaps would open new explorations that outlast the
		// hour's quota. Sources are still researched.
		rcfg.GapRounds = -1
	}
	return researcher.New(rcfg)
}

func researcherLogService(rc *ServiceEnv) (func(), error) {
	if !rc.Cfg.Researcher.Enabled {
		return nil, nil
	}
	return moduleEventLog(rc, researcherOwner, researcher.Name,
		[]string{"source", "name", "verdict", "finding", "question", "round", "questions", "reason", "id", "title"}), nil
}
