package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"fano/actors"
	"fano/config"
	"fano/modules"
	"fano/modules/dedup"
	"fano/modules/explorer"
	"fano/pb"
	"fano/wal"
)

// The explorer module: its constructor, the offline rebuild `fano seed
// add` uses when no fano runs, and a run service that logs what it does.

// moduleEnv is what a module constructor may use.
type moduleEnv struct {
	Cfg     *config.Config
	DataDir string
	Logger  zerolog.Logger
	// UntilIdle: the run ends when no work is left.
	UntilIdle bool
	// Checker is the one duplicate checker of the modules built together.
	Checker *dedup.Checker
}

// newChecker is the duplicate checker the modules of one build share.
// Safe for concurrent use.
func newChecker(cfg *config.Config) *dedup.Checker {
	return dedup.New(dedup.Config{
		Threshold:     cfg.Deduplication.SimilarityThreshold,
		BorderlineLow: cfg.Deduplication.BorderlineLow,
	})
}

// explorerConfig turns config.Explorer and its neighbours into the
// explorer's Config.
func explorerConfig(env *moduleEnv) (explorer.Config, error) {
	cfg := env.Cfg
	e := cfg.Explorer
	seeds := explorer.DefaultSeeds()
	if e.SeedsFile != "" {
		s, err := explorer.LoadSeeds(e.SeedsFile)
		if err != nil {
			return explorer.Config{}, fmt.Errorf("explorer.seeds_file: %w", err)
		}
		seeds = s
	}
	backends := cfg.EnabledBackends()
	var deep []string
	for _, name := range backends {
		if b, _ := cfg.Backend(name); b.DeepModeDailyLimit > 0 {
			deep = append(deep, name)
		}
	}
	d := cfg.Deduplication
	return explorer.Config{
		Seeds: seeds, Backends: backends, DeepBackends: deep, PreferDeep: preferredDeepBackend(cfg, deep),
		MaxActiveThreads: e.MaxActiveThreads, ExplorationTurns: cfg.MaxRequests(explorer.TypeExploration),
		ReviewPanelSize: e.ReviewPanelSize, MinBless: e.Consensus.MinBless, MaxReject: e.Consensus.MaxReject,
		InsightMinChars: e.InsightMinChars, InsightMaxChars: e.InsightMaxChars,
		Dedup: explorer.DedupConfig{
			Enabled: d.Enabled, UseBatchLLM: d.UseBatchLLM, BatchSize: d.BatchSize,
			Threshold: d.SimilarityThreshold, BorderlineLow: d.BorderlineLow,
		},
		Checker:     env.Checker,
		PromptsDir:  e.PromptsDir,
		MaxRequests: cfg.MaxRequests,
	}, nil
}

// preferredDeepBackend is the backend synthesis requires (gemini,
// for its deep think): the enabled backend named gemini, else one
// whose browser profile or sim style is gemini; it must have a deep mode.
// "" lets any backend with a deep mode synthesize.
func preferredDeepBackend(cfg *config.Config, deep []string) string {
	for _, name := range deep {
		if name == "gemini" {
			return name
		}
	}
	for _, name := range deep {
		b, _ := cfg.Backend(name)
		if (b.Browser != nil && b.Browser.Profile == "gemini") || (b.Sim != nil && b.Sim.Style == "gemini") {
			return name
		}
	}
	return ""
}

func newExplorerModule(env *moduleEnv) (modules.Module, error) {
	if !env.Cfg.Explorer.Enabled {
		return nil, nil
	}
	c, err := explorerConfig(env)
	if err != nil {
		return nil, err
	}
	return explorer.New(c)
}

const explorerOwner = "module/" + explorer.Name

// NewExplorer builds the explorer from cfg, as a run does, for a command
// that works on its state offline (`fano seed add`). A disabled explorer
// is an error saying so.
func NewExplorer(cfg *config.Config, logger zerolog.Logger) (*explorer.Module, error) {
	mod, err := newExplorerModule(&moduleEnv{Cfg: cfg, DataDir: cfg.DataDir, Logger: logger, Checker: newChecker(cfg)})
	if err == nil && mod == nil {
		err = errors.New("the explorer is disabled in the config (explorer.enabled: false)")
	}
	if err != nil {
		return nil, err
	}
	return mod.(*explorer.Module), nil
}

// RecoverOffline rebuilds a module from its checkpoint and the WAL entries
// after it, as recovery does, without the rest of fano.
func RecoverOffline(log *wal.Log, m modules.Module) error {
	owner := "module/" + m.Name()
	cp, ok, err := log.LoadCheckpoint(owner)
	if err != nil {
		return err
	}
	from := uint64(1)
	if ok {
		if err := m.Restore(cp.Snapshot); err != nil {
			return fmt.Errorf("checkpoint of %s at seq %d: %w", owner, cp.Seq, err)
		}
		from = cp.Seq + 1
	}
	return log.Replay(from, func(ent wal.Entry) error {
		if ent.Owner != owner {
			return nil
		}
		var e pb.Event
		if err := proto.Unmarshal(ent.Payload, &e); err != nil {
			return fmt.Errorf("wal entry %d (%s): decode: %w", ent.Seq, owner, err)
		}
		me := e.GetModuleEvent()
		if me == nil {
			return fmt.Errorf("wal entry %d (%s) is not a module event", ent.Seq, owner)
		}
		if err := m.Apply(me, time.Unix(0, e.At)); err != nil {
			return fmt.Errorf("wal entry %d (%s): %w", ent.Seq, owner, err)
		}
		return nil
	})
}

// explorerLogService logs the explorer's applied events as they happen
// (event "modules.explorer.<type>"), and the start of each explorer task
// with its LLM ("modules.explorer.task_started"), so the run log tells
// the story: a thread started, a reviewer at work, an insight blessed. It hands events to a
// goroutine through a buffer and drops them when the buffer is full,
// because a subscriber must not block the module's actor.
func explorerLogService(rc *ServiceEnv) (func(), error) {
	if !rc.Cfg.Explorer.Enabled {
		return nil, nil
	}
	ch := make(chan *pb.ModuleEvent, 1024)
	var mu sync.RWMutex // closed is set under mu: no send after close
	closed := false
	unsubscribe := rc.Sys.Subscribe(func(n actors.Notice) {
		if n.Event == nil {
			return
		}
		var me *pb.ModuleEvent
		switch {
		case n.Owner == explorerOwner:
			me = n.Event.GetModuleEvent()
		case n.Event.GetTaskStarted() != nil && strings.HasPrefix(n.Event.GetTaskStarted().TaskId, explorer.Name+"/"):
			// Which LLM took which explorer task: logged as a pseudo-event.
			ts := n.Event.GetTaskStarted()
			me = &pb.ModuleEvent{Type: "task_started", TaskId: ts.TaskId, Data: mustJSONLog(map[string]string{"llm": ts.Llm})}
		}
		if me == nil {
			return
		}
		mu.RLock()
		defer mu.RUnlock()
		if !closed {
			select {
			case ch <- me:
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
			ev := rc.Logger.Info().Str("event", "modules.explorer."+me.Type)
			if me.TaskId != "" {
				ev = ev.Str("task", me.TaskId)
			}
			for _, k := range []string{"id", "seed", "thread", "chunk", "insight", "round", "reviewer", "verdict", "outcome", "duplicate_of", "status", "llm", "reason"} {
				if v, ok := fields[k]; ok {
					ev = ev.Interface(k, v)
				}
			}
			if ins, ok := fields["insights"].([]any); ok {
				ev = ev.Int("insights", len(ins))
			}
			ev.Msg("explorer " + me.Type)
		}
	}()
	return func() {
		unsubscribe()
		mu.Lock()
		closed = true
		close(ch)
		mu.Unlock()
		<-done
	}, nil
}

func mustJSONLog(v any) []byte {
	b, _ := json.Marshal(v) // a map of strings always encodes
	return b
}
