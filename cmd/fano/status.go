package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"fano/actors"
	"fano/actors/allocator"
	"fano/control"
	"fano/pb"
	"fano/remote"
	"fano/wal"
)

// statusReport is `fano status --json`, one shape whether fano runs or
// not: running, it comes from the control panel; stopped, the same
// figures are read from the data directory. Keys that only a running
// fano has (started_at, uptime) or only a stopped one (recovery) are
// left out otherwise.
type statusReport struct {
	Running bool `json:"running"`
	// State is "running", "not_accepting" (the health monitor stopped new
	// work) or "stopped".
	State   string `json:"state"`
	Message string `json:"message,omitempty"`
	DataDir string `json:"data_dir"`

	StartedAt *time.Time `json:"started_at,omitempty"`
	Uptime    string     `json:"uptime,omitempty"`

	Tasks        control.TaskSummary          `json:"tasks"`
	LLMs         map[string]control.LLMStatus `json:"llms"`
	Backends     []control.BackendView        `json:"backends"`
	Modules      []control.ModuleView         `json:"modules"`
	RunningTasks []control.RunningTask        `json:"running_tasks"`
	WAL          *control.WALView             `json:"wal,omitempty"`
	// Recovery is what the next start will repair (a dry run; stopped only).
	Recovery *actors.RecoveryReport `json:"recovery,omitempty"`
	// Ops is health (while fano runs) and the 24-hour metrics.
	Ops *opsSection `json:"ops,omitempty"`
	// Hosts are the gateway hosts on other machines, as the orchestrator
	// last saw them.
	Hosts []remote.HostStatus `json:"hosts,omitempty"`

	otherPanel bool // another data directory's fano answered at the panel address
}

func newStatusCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show whether fano runs, its tasks, LLM quotas, health and the last 24 hours",
		Long: "Show whether fano runs on the data directory, how many tasks it has in each state, each LLM\n" +
			"backend's quota, health and the last 24 hours' figures. With fano stopped, the same figures are\n" +
			"read from the data directory, with what the next start will repair.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := findPanel(g)
			if err != nil {
				return err
			}
			if live, err := livePanelStatus(cmd, g, p); err != nil || live {
				return err
			}
			rep, err := offlineStatus(g, p)
			if err != nil {
				return err
			}
			return printStatus(cmd, g, rep)
		},
	}
	jsonFlag(cmd, g)
	return cmd
}

// offlineStatus reads the status from the data directory. A database
// another process holds means a fano runs whose panel does not answer:
// only what it leaves on disk for status (ops-status.json) is shown.
func offlineStatus(g *globals, p *panelConn) (statusReport, error) {
	dataDir, err := filepath.Abs(p.cfg.DataDir)
	if err != nil {
		return statusReport{}, err
	}
	rep := statusReport{State: "stopped", DataDir: dataDir, LLMs: map[string]control.LLMStatus{},
		Backends: []control.BackendView{}, Modules: []control.ModuleView{}, RunningTasks: []control.RunningTask{}}
	rep.Tasks.ByModule = map[string]map[string]int{}
	a, err := openAppReadOnly(g)
	if errors.Is(err, wal.ErrLocked) {
		rep.Running, rep.State = true, "running"
		rep.Message = err.Error() + "; its control panel does not answer at " + p.addr +
			", so tasks and quotas are not shown (is control.enabled off?)"
		rep.Ops, err = readOpsStatus(p.cfg.DataDir, nil, time.Now())
		return rep, err
	}
	if err != nil {
		return rep, err
	}
	defer a.close()
	rep.Message, rep.otherPanel = p.offlineNote("status"), p.otherDataDir != ""
	now := time.Now()
	st, err := a.log.Stats()
	if err != nil {
		return rep, err
	}
	rep.WAL = &control.WALView{Bytes: st.Bytes, Entries: st.Entries, LastSeq: st.LastSeq, Uncommitted: st.Uncommitted, Checkpoints: st.Checkpoints}
	if cp := st.OldestCheckpoint; cp.Owner != "" {
		rep.WAL.OldestCheckpoint = &control.CheckpointView{Owner: cp.Owner, Seq: cp.Seq, At: cp.Time}
	}
	opts, err := a.options(clockwork.NewRealClock())
	if err != nil {
		return rep, err
	}
	sched, err := readScheduler(a)
	if err != nil {
		return rep, err
	}
	rep.Tasks = taskSummary(sched.Counts(), sched.Tasks, now)
	for _, m := range opts.Modules {
		rep.Modules = append(rep.Modules, control.ModuleView{Name: m.Name(), Capabilities: []string{}, Tasks: nonNilCounts(rep.Tasks.ByModule[m.Name()])})
	}
	book, err := readAllocator(a, opts.Allocator, now)
	if err != nil {
		return rep, err
	}
	for _, b := range book.Status(now) {
		rep.LLMs[b.Name] = control.LLMStatus{Available: b.Available, HourlyUsed: b.HourlyUsed, HourlyLimit: b.HourlyLimit,
			DeepModeUsed: b.DeepUsed, DeepModeLimit: b.DeepLimit}
		rep.Backends = append(rep.Backends, control.BackendViewOf(b, now))
	}
	opts.Dry = true
	if rep.Recovery, err = actors.Recover(opts); err != nil {
		return rep, err
	}
	// Lists are lists in JSON, empty or not.
	if rep.Recovery.Repairs == nil {
		rep.Recovery.Repairs = []string{}
	}
	if rep.Recovery.Problems == nil {
		rep.Recovery.Problems = []string{}
	}
	rep.Ops, err = readOpsStatus(a.dataDir, a.log, now)
	return rep, err
}

// taskSummary adds up the scheduler's counts as the panel does; tasks
// lists the tasks a filter matches (scheduler.State.Tasks).
func taskSummary(counts map[string]map[pb.TaskState]int, tasks func(func(*pb.Task) bool, int) []*pb.Task, now time.Time) control.TaskSummary {
	sum := control.TaskSummary{ByModule: map[string]map[string]int{}}
	for module, byState := range counts {
		m := map[string]int{}
		for state, n := range byState {
			if n == 0 {
				continue
			}
			m[control.StateName(state)] = n
			switch state {
			case pb.TaskState_TASK_STATE_PENDING:
				sum.Pending += n
			case pb.TaskState_TASK_STATE_READY:
				sum.Ready += n
			case pb.TaskState_TASK_STATE_RUNNING:
				sum.Running += n
			case pb.TaskState_TASK_STATE_PAUSED:
				sum.Paused += n
			case pb.TaskState_TASK_STATE_COMPLETED:
				sum.Completed += n
			case pb.TaskState_TASK_STATE_FAILED:
				sum.Failed += n
			case pb.TaskState_TASK_STATE_CANCELLED:
				sum.Cancelled += n
			}
		}
		sum.ByModule[module] = m
	}
	since := now.Add(-24 * time.Hour).UnixNano()
	tasks(func(t *pb.Task) bool {
		if t.GetState() == pb.TaskState_TASK_STATE_COMPLETED && t.GetCompletedAt() >= since {
			sum.Completed24h++
		}
		return false // counts, keeps nothing
	}, 0)
	return sum
}

func nonNilCounts(m map[string]int) map[string]int {
	if m == nil {
		return map[string]int{}
	}
	return m
}

// allocatorOwner is the WAL owner of quota events (pb/events.proto).
const allocatorOwner = "allocator"

// readAllocator loads the allocator's checkpoint and replays its later
// entries, writing nothing; hour and day windows that ended since are
// reset in memory, so the quotas read as the next start will see them.
func readAllocator(a *app, cfg allocator.Config, now time.Time) (*allocator.Book, error) {
	book := allocator.New(cfg)
	from := uint64(1)
	cp, ok, err := a.log.LoadCheckpoint(allocatorOwner)
	if err != nil {
		return nil, fmt.Errorf("read quotas: %w", err)
	}
	if ok {
		var snap pb.AllocatorSnapshot
		if err := proto.Unmarshal(cp.Snapshot, &snap); err != nil {
			return nil, fmt.Errorf("read quotas: allocator checkpoint at seq %d does not decode: %w", cp.Seq, err)
		}
		if book, err = allocator.Restore(cfg, &snap); err != nil {
			return nil, fmt.Errorf("read quotas: allocator checkpoint at seq %d: %w", cp.Seq, err)
		}
		from = cp.Seq + 1
	}
	err = a.log.Replay(from, func(ent wal.Entry) error {
		if ent.Owner != allocatorOwner {
			return nil
		}
		var e pb.Event
		if err := proto.Unmarshal(ent.Payload, &e); err != nil {
			return fmt.Errorf("wal entry %d (%s): decode: %w", ent.Seq, ent.Type, err)
		}
		_ = book.Apply(&e) // an entry that does not apply is `fano recover`'s to report
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read quotas: %w", err)
	}
	for _, e := range book.DecideTick(now) {
		_ = book.Apply(e)
	}
	return book, nil
}

// liveStatusReport is the running fano's status in the report's shape.
func liveStatusReport(st control.Status) statusReport {
	started := st.StartedAt
	rep := statusReport{Running: true, State: st.State, DataDir: st.DataDir, StartedAt: &started, Uptime: st.Uptime,
		Tasks: st.Tasks, LLMs: st.LLMs, Backends: st.Backends, Modules: st.Modules, RunningTasks: st.Running,
		WAL: st.WAL, Ops: liveOpsSection(st.Health)}
	if rep.RunningTasks == nil {
		rep.RunningTasks = []control.RunningTask{}
	}
	return rep
}

// panelStatus is the report as the panel's status, for printing.
func (r statusReport) panelStatus() control.Status {
	st := control.Status{State: r.State, Uptime: r.Uptime, DataDir: r.DataDir, Tasks: r.Tasks, LLMs: r.LLMs,
		Backends: r.Backends, Modules: r.Modules, Running: r.RunningTasks, WAL: r.WAL}
	if r.StartedAt != nil {
		st.StartedAt = *r.StartedAt
	}
	return st
}

func printStatus(cmd *cobra.Command, g *globals, r statusReport) error {
	w := cmd.OutOrStdout()
	r.Hosts = readHostsStatus(r.DataDir)
	if g.json {
		return writeJSON(w, r)
	}
	defer printHosts(w, r.Hosts, time.Now())
	if r.Running && r.StartedAt == nil {
		// Held by a fano whose panel does not answer: only the message
		// and what it left on disk.
		fmt.Fprintf(w, "data dir: %s\n%s\n", r.DataDir, r.Message)
		printOps(w, r.Ops)
		return nil
	}
	if r.State == "stopped" && r.otherPanel {
		fmt.Fprintln(w, r.Message) // why the fano that answered was not asked
	}
	if err := printLiveStatus(w, r.panelStatus()); err != nil {
		return err
	}
	if r.WAL != nil {
		oldest := "none"
		if cp := r.WAL.OldestCheckpoint; cp != nil {
			oldest = fmt.Sprintf("%s@%d", cp.Owner, cp.Seq)
		}
		fmt.Fprintf(w, "wal: %d entries, %.1f MB, last seq %d, %d open intents, oldest checkpoint %s\n",
			r.WAL.Entries, float64(r.WAL.Bytes)/1e6, r.WAL.LastSeq, r.WAL.Uncommitted, oldest)
	}
	if rc := r.Recovery; rc != nil && (rc.TasksPaused > 0 || rc.RequestsInterrupted > 0 || len(rc.Repairs) > 0 || len(rc.Problems) > 0) {
		fmt.Fprintf(w, "next start: pauses and resumes %d RUNNING tasks, re-sends %d interrupted requests, %d repairs, %d problems (details: fano recover --dry-run)\n",
			rc.TasksPaused, rc.RequestsInterrupted, len(rc.Repairs), len(rc.Problems))
	}
	printOps(w, r.Ops)
	return nil
}
