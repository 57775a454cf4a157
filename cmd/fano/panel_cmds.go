package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"fano/actors"
	"fano/actors/scheduler"
	"fano/config"
	"fano/control"
	"fano/pb"
	"fano/wal"
)

// Commands that talk to the running orchestrator through its control
// panel: fano tasks, cancel, seed add, comment add. With none running,
// read commands read the data directory and say so; changes need it
// running (except `seed add`, which writes to a stopped fano's data
// directory: seedAddOffline).

// panelConn is how the CLI reaches a running panel.
type panelConn struct {
	cfg    *config.Config
	client *control.Client
	addr   string
	tokErr error // why no token could be read (reported only for changes)
	// otherDataDir is the data directory of a fano that answered at addr
	// for another data directory (set by online): this one's fano is not
	// the one answering, so reads come from the disk.
	otherDataDir string
}

// findPanel works out the panel's address (<data-dir>/panel.addr, written
// by the running fano, else control.address) and token (control.token,
// $control.token_env, else <data-dir>/panel.token).
func findPanel(g *globals) (*panelConn, error) {
	cfg, err := loadConfig(g)
	if err != nil {
		return nil, err
	}
	addr := cfg.Control.Address
	if b, err := os.ReadFile(filepath.Join(cfg.DataDir, control.AddrFile)); err == nil && strings.TrimSpace(string(b)) != "" {
		addr = strings.TrimSpace(string(b))
	}
	base, err := control.BaseURL(addr)
	if err != nil {
		return nil, err
	}
	tok, _, tokErr := control.ResolveToken(cfg.Control, cfg.DataDir, os.Getenv, false)
	hc := &http.Client{Timeout: 30 * time.Second}
	if strings.HasPrefix(base, "https://") {
		// A panel served over TLS: trust its certificate (fano's own,
		// self-signed, or the one of control.tls_cert).
		certFile := cfg.Control.TLSCert
		if certFile == "" {
			certFile = filepath.Join(cfg.DataDir, control.TLSCertFile)
		}
		tc, err := control.ClientTLS(certFile)
		if err != nil {
			return nil, err
		}
		hc.Transport = &http.Transport{TLSClientConfig: tc}
	}
	return &panelConn{cfg: cfg, addr: addr, tokErr: tokErr,
		client: &control.Client{BaseURL: base, Token: tok, HTTP: hc}}, nil
}

// online says whether the panel of this data directory answers. A panel
// that serves another data directory (another fano on the default port)
// does not count: online reports false and notes it in otherDataDir, so
// reads come from this data directory on disk and say why.
func (p *panelConn) online(ctx context.Context) (bool, error) {
	if !p.cfg.Control.Enabled {
		return false, nil // this data directory's fano runs no panel
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	h, err := p.client.Healthz(ctx)
	if errors.Is(err, control.ErrNotRunning) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("control panel at %s: %w", p.addr, err)
	}
	if want, err := filepath.Abs(p.cfg.DataDir); err == nil && h.DataDir != "" && h.DataDir != want {
		p.otherDataDir = h.DataDir
		return false, nil
	}
	return true, nil
}

// offlineNote says where an offline read comes from and, when another
// fano answered at the panel address, that it was not used.
func (p *panelConn) offlineNote(what string) string {
	if p.otherDataDir != "" {
		return fmt.Sprintf("%s read from %s on disk (the fano answering at %s runs on data dir %s, not this one)",
			what, p.cfg.DataDir, p.addr, p.otherDataDir)
	}
	return fmt.Sprintf("fano is not running: %s as recorded in %s", what, p.cfg.DataDir)
}

// needToken says why a change cannot be authorised, if it cannot.
func (p *panelConn) needToken() error {
	if p.tokErr != nil {
		return fmt.Errorf("panel token: %w", p.tokErr)
	}
	if p.client.Token == "" {
		return fmt.Errorf("no panel token: none in control.token, $%s or %s", p.cfg.Control.TokenEnv, filepath.Join(p.cfg.DataDir, control.TokenFile))
	}
	return nil
}

// notRunningError is the error of a change (what) that needs the running
// orchestrator when no panel of this data directory answers; it keeps the
// panel so a caller can fall back or explain in its own words.
type notRunningError struct {
	panel *panelConn
	what  string
}

func (e *notRunningError) Error() string {
	p := e.panel
	answer := "no control panel answers at " + p.addr
	if p.otherDataDir != "" {
		answer = fmt.Sprintf("the fano answering at %s runs on data dir %s", p.addr, p.otherDataDir)
	}
	return fmt.Sprintf("fano is not running on %s (%s): %s needs the running orchestrator; start it with `fano run`",
		p.cfg.DataDir, answer, e.what)
}

// livePanel is the panel of this data directory's running orchestrator,
// with a token to post with, for the change named what. When no such
// panel answers the error is a *notRunningError.
func livePanel(ctx context.Context, g *globals, what string) (*panelConn, error) {
	p, err := findPanel(g)
	if err != nil {
		return nil, err
	}
	up, err := p.online(ctx)
	if err != nil {
		return nil, err
	}
	if !up {
		return nil, &notRunningError{panel: p, what: what}
	}
	if err := p.needToken(); err != nil {
		return nil, err
	}
	return p, nil
}

// apiErr makes an API error one clear line.
func apiErr(what string, err error) error {
	var ae *control.APIError
	if errors.As(err, &ae) {
		return fmt.Errorf("%s: %s (HTTP %d)", what, ae.Message, ae.Status)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// tasksReport is `fano tasks --json`.
type tasksReport struct {
	Running bool   `json:"running"`
	Message string `json:"message,omitempty"`
	// Total is how many tasks match --module and --state; Tasks holds the
	// newest --limit of them.
	Total int                `json:"total"`
	Tasks []control.TaskView `json:"tasks"`
}

// maxTaskList is the most tasks one list holds (the control panel's cap).
const maxTaskList = 10000

func newTasksCmd(g *globals) *cobra.Command {
	var module, state string
	var limit int
	cmd := &cobra.Command{
		Use:   "tasks [task-id]",
		Short: "List tasks, newest first (or show one task with its conversation)",
		Long: "List the tasks of the running fano, newest first; with fano stopped, as recorded in the data directory.\n" +
			"The 50 newest are shown unless --limit says otherwise (--limit 0: all).\n" +
			"With a task id, show that task and its conversation.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if state != "" {
				if _, ok := control.ParseState(state); !ok {
					return fmt.Errorf("--state: unknown task state %q (use pending, ready, running, paused, completed, failed or cancelled)", state)
				}
			}
			if limit < 0 || limit > maxTaskList {
				return fmt.Errorf("--limit: must be from 0 (all) to %d (is %d)", maxTaskList, limit)
			}
			p, err := findPanel(g)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			up, err := p.online(ctx)
			if err != nil {
				return err
			}
			var rep tasksReport
			if up {
				rep.Running = true
				if len(args) == 1 {
					t, err := p.client.Task(ctx, args[0])
					if err != nil {
						return apiErr("task "+args[0], err)
					}
					rep.Tasks = []control.TaskView{t}
				} else {
					if rep.Tasks, err = p.client.Tasks(ctx, module, state, cmp.Or(limit, maxTaskList)); err != nil {
						return apiErr("tasks", err)
					}
					st, err := p.client.Status(ctx)
					if err != nil {
						return apiErr("status", err)
					}
					rep.Total = max(len(rep.Tasks), countTasks(st.Tasks.ByModule, module, state))
				}
			} else {
				off, err := offlineTasks(g, p, module, state, limit, args)
				if err != nil {
					return err
				}
				rep.Tasks, rep.Total = off.tasks, off.total
				rep.Message = p.offlineNote("tasks")
				if off.running > 0 {
					rep.Message += fmt.Sprintf(" (%d RUNNING when fano stopped: the next start pauses and resumes %s)",
						off.running, map[bool]string{true: "it", false: "them"}[off.running == 1])
				}
			}
			if len(args) == 1 {
				rep.Total = 1
			}
			if rep.Tasks == nil {
				rep.Tasks = []control.TaskView{}
			}
			if g.json {
				return writeJSON(cmd.OutOrStdout(), rep)
			}
			if rep.Message != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), rep.Message)
			}
			if len(args) == 1 {
				return printTask(cmd.OutOrStdout(), rep.Tasks[0])
			}
			if err := printTasks(cmd.OutOrStdout(), rep.Tasks); err != nil {
				return err
			}
			if n := len(rep.Tasks); n < rep.Total {
				hint := "use --limit or --state"
				if limit == 0 {
					hint = fmt.Sprintf("a list holds at most %d; use --state or --module", maxTaskList)
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "%d of %d (%s)\n", n, rep.Total, hint)
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&module, "module", "", "only tasks of this module")
	cmd.Flags().StringVar(&state, "state", "", "only tasks in this state (pending, ready, running, paused, completed, failed, cancelled)")
	cmd.Flags().IntVar(&limit, "limit", 50, "show at most this many tasks, newest first (0: all)")
	jsonFlag(cmd, g)
	return cmd
}

// offlineList is what offlineTasks read: the newest tasks, how many
// matched, and how many of those were RUNNING when fano stopped.
type offlineList struct {
	tasks   []control.TaskView
	total   int
	running int
}

// offlineTasks rebuilds the scheduler's tasks from the WAL (checkpoint,
// then its later entries), read-only. A locked database means a fano runs
// whose panel does not answer: that is said, not worked around.
func offlineTasks(g *globals, p *panelConn, module, state string, limit int, ids []string) (offlineList, error) {
	a, err := openAppReadOnly(g)
	if errors.Is(err, wal.ErrLocked) {
		return offlineList{}, fmt.Errorf("%w; its control panel does not answer at %s (is control.enabled off?)", err, p.addr)
	}
	if err != nil {
		return offlineList{}, err
	}
	defer a.close()
	st, err := readScheduler(a)
	if err != nil {
		return offlineList{}, err
	}
	if len(ids) == 1 {
		t, ok := st.Task(ids[0])
		if ok && t.GetArchived() {
			// Finished: its conversation is in the archive.
			if at, found, err := actors.ArchivedTask(a.log, t, ids[0]); err == nil && found {
				t = at
			}
		}
		if !ok {
			return offlineList{}, fmt.Errorf("task %q not found in %s", ids[0], a.dataDir)
		}
		running := 0
		if t.GetState() == pb.TaskState_TASK_STATE_RUNNING {
			running = 1
		}
		return offlineList{tasks: []control.TaskView{control.TaskViewOf(t, true)}, total: 1, running: running}, nil
	}
	want, _ := control.ParseState(state)
	tasks := st.Tasks(func(t *pb.Task) bool {
		return (module == "" || t.GetModule() == module) && (state == "" || t.GetState() == want)
	}, 0)
	slices.SortFunc(tasks, func(x, y *pb.Task) int {
		return cmp.Or(cmp.Compare(y.GetCreatedAt(), x.GetCreatedAt()), strings.Compare(x.GetId(), y.GetId()))
	})
	res := offlineList{total: len(tasks)}
	for _, t := range tasks {
		if t.GetState() == pb.TaskState_TASK_STATE_RUNNING {
			res.running++
		}
	}
	if limit > 0 && len(tasks) > limit {
		tasks = tasks[:limit]
	}
	res.tasks = make([]control.TaskView, 0, len(tasks))
	for _, t := range tasks {
		res.tasks = append(res.tasks, control.TaskViewOf(t, false))
	}
	return res, nil
}

// countTasks adds up the status's counts (module -> state -> n) of the
// tasks that match module and state ("" matches any).
func countTasks(byModule map[string]map[string]int, module, state string) int {
	want := ""
	if st, ok := control.ParseState(state); ok {
		want = control.StateName(st)
	}
	n := 0
	for m, byState := range byModule {
		if module != "" && m != module {
			continue
		}
		for s, c := range byState {
			if want == "" || s == want {
				n += c
			}
		}
	}
	return n
}

// schedulerOwner is the WAL owner of task events (pb/events.proto).
const schedulerOwner = "scheduler"

// readScheduler loads the scheduler's checkpoint and replays its later
// entries, writing nothing.
func readScheduler(a *app) (*scheduler.State, error) {
	cfg := scheduler.FromConfig(a.cfg)
	st := scheduler.New(cfg)
	from := uint64(1)
	cp, ok, err := a.log.LoadCheckpoint(schedulerOwner)
	if err != nil {
		return nil, fmt.Errorf("read tasks: %w", err)
	}
	if ok {
		var snap pb.SchedulerSnapshot
		if err := proto.Unmarshal(cp.Snapshot, &snap); err != nil {
			return nil, fmt.Errorf("read tasks: scheduler checkpoint at seq %d does not decode: %w", cp.Seq, err)
		}
		if st, err = scheduler.Restore(cfg, &snap); err != nil {
			return nil, fmt.Errorf("read tasks: scheduler checkpoint at seq %d: %w", cp.Seq, err)
		}
		from = cp.Seq + 1
	}
	err = a.log.Replay(from, func(ent wal.Entry) error {
		if ent.Owner != schedulerOwner {
			return nil
		}
		var e pb.Event
		if err := proto.Unmarshal(ent.Payload, &e); err != nil {
			return fmt.Errorf("wal entry %d (%s): decode: %w", ent.Seq, ent.Type, err)
		}
		_ = st.Apply(&e) // an entry that does not apply is `fano recover`'s to report
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read tasks: %w", err)
	}
	return st, nil
}

func printTasks(w io.Writer, tasks []control.TaskView) error {
	if len(tasks) == 0 {
		_, err := fmt.Fprintln(w, "no tasks")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATE\tMODULE\tTYPE\tLLM\tREQUESTS\tPRIORITY\tCREATED\tID")
	for _, t := range tasks {
		created := ""
		if t.CreatedAt != nil {
			created = shownTime(*t.CreatedAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", t.State, t.Module, t.TaskType, cmp.Or(t.LLMAssigned, "-"),
			t.RequestCount, t.MaxRequests, shownPriority(t), created, t.ID)
	}
	return tw.Flush()
}

// shownPriority is a task's priority as a person reads it.
func shownPriority(t control.TaskView) string {
	if t.Overdue {
		return fmt.Sprintf("%d (overdue)", t.Priority)
	}
	return strconv.Itoa(int(t.Priority))
}

func printTask(w io.Writer, t control.TaskView) error {
	fmt.Fprintf(w, "%s  %s  (%s/%s)\n", t.ID, t.State, t.Module, t.TaskType)
	fmt.Fprintf(w, "  requests %d/%d, priority %s, attempts %d, llm %s\n", t.RequestCount, t.MaxRequests, shownPriority(t), t.Attempts, cmp.Or(t.LLMAssigned, "-"))
	if t.Error != "" {
		fmt.Fprintf(w, "  error: %s\n", t.Error)
	}
	if t.PauseReason != "" {
		fmt.Fprintf(w, "  paused: %s\n", t.PauseReason)
	}
	if c := t.Conversation; c != nil {
		fmt.Fprintf(w, "  conversation on %s, %d turns\n", cmp.Or(c.LLM, "-"), c.TurnCount)
		for _, m := range c.Messages {
			fmt.Fprintf(w, "\n[%s%s]\n%s\n", m.Role, map[bool]string{true: " " + m.LLM, false: ""}[m.LLM != ""], m.Content)
		}
	}
	return nil
}

func newCancelCmd(g *globals) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel <task-id>",
		Short: "Cancel a waiting or running task (fano must be running)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := livePanel(cmd.Context(), g, "cancel")
			if err != nil {
				return err
			}
			r, err := p.client.Cancel(cmd.Context(), args[0], reason)
			if err != nil {
				return apiErr("cancel "+args[0], err)
			}
			if g.json {
				return writeJSON(cmd.OutOrStdout(), r)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", r.TaskID, r.Status)
			return err
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (kept with the task)")
	jsonFlag(cmd, g)
	return cmd
}

func newSeedCmd(g *globals) *cobra.Command {
	seed := &cobra.Command{Use: "seed", Short: "Give the explorer questions to work on"}
	var priority int
	add := &cobra.Command{
		Use:   `add "<text>"`,
		Short: "Add a question for the explorer to explore",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			text := strings.TrimSpace(args[0])
			if err := control.CheckText("text", text, control.MaxSeedRunes); err != nil {
				return fmt.Errorf("seed add: %w", err)
			}
			return postSeed(cmd, g, text, priority)
		},
	}
	add.Flags().IntVar(&priority, "priority", 0, "priority of the seed (0: the explorer's default)")
	jsonFlag(add, g)
	seed.AddCommand(add)
	return seed
}

// postSeed adds a seed through the running orchestrator, else through
// seedAddOffline into a stopped fano's data directory.
func postSeed(cmd *cobra.Command, g *globals, text string, priority int) error {
	p, err := livePanel(cmd.Context(), g, "seed add")
	var down *notRunningError
	if errors.As(err, &down) {
		return seedAddOffline(g, text, priority)
	}
	if err != nil {
		return err
	}
	r, err := p.client.AddSeed(cmd.Context(), text, priority)
	if err != nil {
		return apiErr("seed add", err)
	}
	return printCommand(cmd, g, r, "seed")
}

func newCommentCmd(g *globals) *cobra.Command {
	comment := &cobra.Command{Use: "comment", Short: "Comment on the document fano writes"}
	add := &cobra.Command{
		Use:   `add <section-id> "<text>"`,
		Short: "Comment on a section of the document; fano revises it with your comment first (fano must be running)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := control.CheckText("section_id", args[0], 200); err != nil {
				return fmt.Errorf("comment add: %w", err)
			}
			if err := control.CheckText("text", args[1], control.MaxCommentRunes); err != nil {
				return fmt.Errorf("comment add: %w", err)
			}
			return postComment(cmd, g, args[0], args[1])
		},
	}
	jsonFlag(add, g)
	comment.AddCommand(add)
	return comment
}

// postComment adds a comment through the running orchestrator.
func postComment(cmd *cobra.Command, g *globals, section, text string) error {
	p, err := livePanel(cmd.Context(), g, "comment add")
	if err != nil {
		return err
	}
	r, err := p.client.AddComment(cmd.Context(), section, text)
	if err != nil {
		return apiErr("comment add", err)
	}
	return printCommand(cmd, g, r, "comment")
}

func printCommand(cmd *cobra.Command, g *globals, r control.CommandResult, what string) error {
	if g.json {
		return writeJSON(cmd.OutOrStdout(), r)
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s added to %s (%s)\n", what, r.Module, strings.Join(r.Events, ", "))
	return err
}

// livePanelStatus prints the running orchestrator's status from its panel
// and reports true, or reports false when no panel of this data directory
// answers (then `fano status` reads the data directory). For
// cmd/fano/status.go.
func livePanelStatus(cmd *cobra.Command, g *globals, p *panelConn) (bool, error) {
	up, err := p.online(cmd.Context())
	if err != nil || !up {
		return false, err
	}
	st, err := p.client.Status(cmd.Context())
	if err != nil {
		return false, apiErr("status", err)
	}
	return true, printStatus(cmd, g, liveStatusReport(st))
}

func printLiveStatus(w io.Writer, st control.Status) error {
	if st.State == "stopped" {
		fmt.Fprintf(w, "fano is not running (data dir %s): as recorded there\n", st.DataDir)
	} else {
		fmt.Fprintf(w, "fano is %s (up %s, data dir %s)\n", st.State, st.Uptime, st.DataDir)
	}
	t := st.Tasks
	fmt.Fprintf(w, "tasks: %d pending, %d running, %d paused, %d completed (%d in 24 h), %d failed, %d cancelled\n",
		t.Pending+t.Ready, t.Running, t.Paused, t.Completed, t.Completed24h, t.Failed, t.Cancelled)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tSTATE\tHOURLY\tESTIMATE\tRATE\tQUEUE\tDEEP\tIN FLIGHT\tCIRCUIT")
	for _, b := range st.Backends {
		fmt.Fprintf(tw, "%s\t%s\t%d/%d (usable %d)\t%d\t%s\t%d\t%d/%d\t%d/%d\t%s\n", b.Name, backendStateLine(b), b.HourlyUsed, b.HourlyLimit, b.Usable,
			b.LimitEstimate, learnedRate(b), b.LimiterWaiting, b.DeepModeUsed, b.DeepModeLimit, b.InUse, b.MaxConcurrency, cmp.Or(b.Circuit, "-"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, b := range st.Backends {
		if b.Action != "" {
			fmt.Fprintf(w, "%s waits on a person (%s): %s\n", b.Name, b.State, b.Action)
		}
	}
	for _, b := range st.Backends {
		if b.MemoryBytes > 0 {
			fmt.Fprintf(w, "browser %s: %.0f MB (Chromium and its children)\n", b.Name, float64(b.MemoryBytes)/(1<<20))
		}
	}
	for _, r := range st.Running {
		fmt.Fprintf(w, "running: %s on %s (request %d/%d)\n", r.ID, r.LLM, r.RequestCount, r.MaxRequests)
	}
	printLiveHealth(w, st.Health)
	return nil
}

// backendStateLine is a backend's state with its end and reason, e.g.
// "capped until 19:29 (usage cap)".
func backendStateLine(b control.BackendView) string {
	line := b.State
	if b.Until != nil {
		line += " until " + shownTime(*b.Until)
	}
	if b.Reason != "" && b.State != "ready" && b.State != "busy" {
		line += " (" + b.Reason + ")"
	}
	return line
}

// learnedRate is the provider's rate as learned, "-" if none.
func learnedRate(b control.BackendView) string {
	if b.LearnedLimit == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%s", b.LearnedLimit, b.LearnedWindow)
}

// shownTime is how the CLI and the panel show a time: ISO 8601 in the
// person's zone with its offset, so a line read on day 12 is not
// ambiguous and matches the panel.
func shownTime(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05Z07:00") }
