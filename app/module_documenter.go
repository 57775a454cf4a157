package app

import (
	"encoding/json"
	"sync"

	"fano/actors"
	"fano/modules"
	"fano/modules/documenter"
	"fano/pb"
)

// The documenter module: its factory and its event log. The blessed
// insights reach it from the explorer as module messages through the
// actor system (actors/moduleflow.go).

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
