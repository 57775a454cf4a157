package app

import (
	"encoding/json"
	"sync"

	"fano/actors"
	"fano/modules"
	"fano/modules/documenter"
	"fano/modules/explorer"
	"fano/pb"
)

// The documenter module: its factory, and the feed that tells it of the
// explorer's blessed insights. Modules never read each other's state
// directly: the feed reads a blessed insight inside the explorer's host
// (System.WithModule) and has the documenter decide an
// "insight_available" event (System.Command), which is persisted, so the
// documenter's knowledge of an insight survives a restart. At start the
// feed catches up with every blessed insight (the documenter ignores the
// ones it knows), so an insight blessed while the feed was down is not
// missed. (The feed is a separable run service: documenterFeedService.)

const documenterOwner = "module/" + documenter.Name

func documenterConfig(env *moduleEnv) documenter.Config {
	cfg := env.Cfg
	var deep []string
	for _, name := range cfg.EnabledBackends() {
		if b, _ := cfg.Backend(name); b.DeepModeDailyLimit > 0 {
			deep = append(deep, name)
		}
	}
	return documenter.Config{
		Title:        cfg.Documenter.Title,
		Backends:     cfg.EnabledBackends(),
		DeepBackends: deep,
		PanelSize:    cfg.Explorer.ReviewPanelSize,
		MinBless:     cfg.Explorer.Consensus.MinBless,
		ReviewShare:  cfg.WorkAllocation.ReviewExisting,
		Checker:      env.Checker,
		PromptsDir:   cfg.Documenter.PromptsDir,
		Logger:       &env.Logger,
		MaxRequests: func(t string) int {
			if t == documenter.TypeMathEvaluation || t == documenter.TypeExpositionEvaluation || t == documenter.TypeDraft {
				// Stages of incorporate_insight: its budget split.
				return max(3, cfg.MaxRequests("incorporate_insight")/3)
			}
			return cfg.MaxRequests(t)
		},
	}
}

func newDocumenterModule(env *moduleEnv) (modules.Module, error) {
	if !env.Cfg.Documenter.Enabled {
		return nil, nil
	}
	return documenter.New(documenterConfig(env))
}

// blessedNote is what the feed passes from the explorer to the documenter.
type blessedNote struct {
	id, text, seed string
	tags           []string
}

// documenterFeedService feeds blessed insights to the documenter: a
// subscriber hands the ids of insights decided blessed to a worker
// through a buffer (it must not block the explorer's actor); the worker
// reads each insight inside the explorer's host and commands the
// documenter. A full buffer sets a flag that makes the worker catch up
// with the whole blessed store instead.
func documenterFeedService(rc *ServiceEnv) (func(), error) {
	if !rc.Cfg.Documenter.Enabled || !rc.Cfg.Explorer.Enabled {
		return nil, nil
	}
	ch := make(chan string, 1024)
	var mu sync.Mutex
	closed, resync := false, false
	unsubscribe := rc.Sys.Subscribe(func(n actors.Notice) {
		if n.Owner != explorerOwner || n.Event == nil {
			return
		}
		me := n.Event.GetModuleEvent()
		if me == nil || me.Type != "insight_decided" {
			return
		}
		var d struct {
			Insight string `json:"insight"`
			Outcome string `json:"outcome"`
		}
		if json.Unmarshal(me.Data, &d) != nil || d.Outcome != "blessed" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return
		}
		select {
		case ch <- d.Insight:
		default:
			resync = true
		}
	})
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		feedBlessed(rc, nil, quit) // catch up
		for {
			select {
			case <-quit:
				return
			case id, ok := <-ch:
				if !ok {
					return
				}
				mu.Lock()
				all := resync
				resync = false
				mu.Unlock()
				if all {
					feedBlessed(rc, nil, quit)
				} else {
					feedBlessed(rc, []string{id}, quit)
				}
			}
		}
	}()
	return func() {
		unsubscribe()
		mu.Lock()
		closed = true
		close(ch)
		mu.Unlock()
		close(quit)
		<-done
	}, nil
}

// feedBlessed reads the blessed insights ids (nil: all of them) in the
// explorer's host and has the documenter note each. Errors are logged:
// the next start catches up.
func feedBlessed(rc *ServiceEnv, ids []string, quit <-chan struct{}) {
	var notes []blessedNote
	err := rc.Sys.WithModule(explorer.Name, func(m modules.Module) {
		ex, ok := m.(*explorer.Module)
		if !ok {
			return
		}
		seeds := map[string]string{}
		for _, s := range ex.Seeds() {
			seeds[s.ID] = s.Text
		}
		var list []explorer.Insight
		if ids == nil {
			list = ex.Blessed()
		} else {
			for _, id := range ids {
				if ins, ok := ex.Insight(id); ok && ins.Status == explorer.StatusBlessed {
					list = append(list, ins)
				}
			}
		}
		for _, ins := range list {
			notes = append(notes, blessedNote{id: ins.ID, text: ins.Text, tags: ins.Tags, seed: seeds[ins.SeedID]})
		}
	})
	if err != nil {
		rc.Logger.Warn().Err(err).Str("event", "modules.documenter.feed_failed").Msg("could not read blessed insights")
		return
	}
	for _, n := range notes {
		select {
		case <-quit:
			return
		default:
		}
		err := rc.Sys.Command(documenter.Name, func(m modules.Module) ([]*pb.ModuleEvent, error) {
			return m.(*documenter.Module).DecideNoteBlessed(n.id, n.text, n.tags, n.seed, rc.Clock.Now())
		})
		if err != nil {
			rc.Logger.Warn().Err(err).Str("event", "modules.documenter.feed_failed").Str("insight", n.id).Msg("blessed insight not noted; the next start catches up")
		}
	}
}

// documenterLogService logs the documenter's events (event
// "modules.documenter.<type>"), so the run log tells the story.
func documenterLogService(rc *ServiceEnv) (func(), error) {
	if !rc.Cfg.Documenter.Enabled {
		return nil, nil
	}
	return moduleEventLog(rc, documenterOwner, documenter.Name,
		[]string{"insight", "section", "id", "outcome", "verdict", "reviewer", "draft", "title", "status", "reason", "created", "duplicate_of"}), nil
}

// moduleEventLog logs owner's module events through a buffered goroutine
// (dropped when full: a subscriber must not block a module's actor).
func moduleEventLog(rc *ServiceEnv, owner, module string, keys []string) func() {
	ch := make(chan *pb.ModuleEvent, 1024)
	var mu sync.RWMutex
	closed := false
	unsubscribe := rc.Sys.Subscribe(func(n actors.Notice) {
		if n.Owner != owner || n.Event == nil || n.Event.GetModuleEvent() == nil {
			return
		}
		mu.RLock()
		defer mu.RUnlock()
		if !closed {
			select {
			case ch <- n.Event.GetModuleEvent():
			default:
			}
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for me := range ch {
			var fields map[string]any
			_ = json.Unmarshal(me.Data, &fields)
			ev := rc.Logger.Info().Str("event", "modules."+module+"."+me.Type)
			if me.TaskId != "" {
				ev = ev.Str("task", me.TaskId)
			}
			for _, k := range keys {
				if v, ok := fields[k]; ok {
					ev = ev.Interface(k, v)
				}
			}
			ev.Msg(module + " " + me.Type)
		}
	}()
	return func() {
		unsubscribe()
		mu.Lock()
		closed = true
		close(ch)
		mu.Unlock()
		<-done
	}
}
