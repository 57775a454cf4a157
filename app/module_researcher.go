package app

import (
	"errors"
	"sync"

	"fano/actors"
	"fano/modules"
	"fano/modules/documenter"
	"fano/modules/explorer"
	"fano/modules/researcher"
	"fano/pb"
)

// The researcher module: its factory (which reads researcher.sources_dir),
// and the feed that links it to its neighbours, event-sourced both ways:
// the titles of the document's sections are recorded in the researcher
// ("section_noted", for generate_questions), and each finding's question
// is added to the explorer as a seed, then recorded in the researcher as
// delivered ("finding_delivered"). The feed catches up at start, so
// nothing is missed across restarts; each step decides nothing when its
// effect is already there. (The feed is a separable run service:
// researcherFeedService.)

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

// researcherFeedService runs the feed: a subscriber pokes a worker
// (without blocking the actor that applied the event) when a section is
// created or a finding recorded; the worker catches up.
func researcherFeedService(rc *ServiceEnv) (func(), error) {
	if !rc.Cfg.Researcher.Enabled {
		return nil, nil
	}
	poke := make(chan struct{}, 1)
	kick := func() {
		select {
		case poke <- struct{}{}:
		default:
		}
	}
	unsubscribe := rc.Sys.Subscribe(func(n actors.Notice) {
		me := n.Event.GetModuleEvent()
		if me == nil {
			return
		}
		if (n.Owner == documenterOwner && me.Type == "incorporated") ||
			(n.Owner == researcherOwner && (me.Type == "findings_synthesized" || me.Type == "questions_generated")) {
			kick()
		}
	})
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		kick()
		for {
			select {
			case <-quit:
				return
			case <-poke:
				researcherCatchUp(rc, quit)
			}
		}
	}()
	return func() {
		unsubscribe()
		close(quit)
		wg.Wait()
	}, nil
}

func researcherCatchUp(rc *ServiceEnv, quit <-chan struct{}) {
	stopping := func() bool {
		select {
		case <-quit:
			return true
		default:
			return false
		}
	}
	warn := func(err error, what string) {
		rc.Logger.Warn().Err(err).Str("event", "modules.researcher.feed_failed").Msg(what + "; the next start catches up")
	}
	if rc.Cfg.Documenter.Enabled {
		type sec struct{ id, title string }
		var secs []sec
		err := rc.Sys.WithModule(documenter.Name, func(m modules.Module) {
			if d, ok := m.(*documenter.Module); ok {
				for _, s := range d.Sections() {
					secs = append(secs, sec{s.ID, s.Title})
				}
			}
		})
		if err != nil {
			warn(err, "document sections not read")
			return
		}
		for _, s := range secs {
			if stopping() {
				return
			}
			if err := rc.Sys.Command(researcher.Name, func(m modules.Module) ([]*pb.ModuleEvent, error) {
				return m.(*researcher.Module).DecideNoteSection(s.id, s.title)
			}); err != nil {
				warn(err, "section "+s.id+" not noted")
			}
		}
	}
	if !rc.Cfg.Explorer.Enabled {
		return
	}
	var findings []researcher.Finding
	if err := rc.Sys.WithModule(researcher.Name, func(m modules.Module) {
		findings = m.(*researcher.Module).Undelivered()
	}); err != nil {
		warn(err, "findings not read")
		return
	}
	for _, f := range findings {
		if stopping() {
			return
		}
		err := rc.Sys.Command(explorer.Name, func(m modules.Module) ([]*pb.ModuleEvent, error) {
			return m.(modules.SeedTaker).DecideAddSeed(f.Question, 0, rc.Clock.Now())
		})
		switch {
		case err == nil:
			rc.Logger.Info().Str("event", "modules.researcher.seed_added").Str("finding", f.ID).Str("question", f.Question).Msg("a research finding became an explorer seed")
		case errors.Is(err, explorer.ErrSeedExists):
		case isStopping(rc):
			return
		default:
			// A question the explorer refuses (too long, empty) can never
			// become a seed: recorded as handled, with the reason logged.
			rc.Logger.Warn().Err(err).Str("event", "modules.researcher.seed_refused").Str("finding", f.ID).Msg("the explorer refused a finding's question")
		}
		if err := rc.Sys.Command(researcher.Name, func(m modules.Module) ([]*pb.ModuleEvent, error) {
			return m.(*researcher.Module).DecideDelivered(f.ID)
		}); err != nil {
			warn(err, "finding "+f.ID+" not marked delivered")
		}
	}
}

// isStopping: the system no longer answers (fano is stopping).
func isStopping(rc *ServiceEnv) bool {
	return rc.Sys.WithModule(researcher.Name, func(modules.Module) {}) != nil
}

func researcherLogService(rc *ServiceEnv) (func(), error) {
	if !rc.Cfg.Researcher.Enabled {
		return nil, nil
	}
	return moduleEventLog(rc, researcherOwner, researcher.Name,
		[]string{"source", "name", "verdict", "finding", "question", "round", "questions", "reason", "id", "title"}), nil
}
