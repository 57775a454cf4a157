package actors

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/actors/allocator"
	"fano/actors/scheduler"
	"fano/gateway"
	"fano/gateway/sim"
	"fano/internal/procs"
	"fano/modules/probe"
	"fano/pb"
	"fano/wal"
)

// rssMB reads the process's resident memory (VmRSS) in MB.
func rssMB() float64 { return procStatusMB("VmRSS:") }

// procStatusMB reads one "kB" field of /proc/self/status in MB.
func procStatusMB(field string) float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, field) {
			f := strings.Fields(line)
			kb, _ := strconv.Atoi(f[1])
			return float64(kb) / 1024
		}
	}
	return -1
}

// BenchmarkEndToEnd: 20,000 tasks, each one zero-latency sim call, 64
// running at once, from the first submit to the last durable completion.
// 64 producers submit their tasks in batches of benchSubmitBatch
// (System.SubmitBatch), as River's producer inserts its jobs in batches.
// Goal: >= 5,000 tasks/s. Baseline in the same run: the same events written
// straight to the WAL by 64 goroutines with no actors (the storage floor),
// their submits batched alike.
func BenchmarkEndToEnd(b *testing.B) {
	const tasks = endToEndTasks
	// As fano run and fano pipeline run do (internal/procs): one P more
	// than the CPUs, unless GOMAXPROCS is set. The floor runs so too.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs.For(runtime.GOMAXPROCS(0), os.Getenv("GOMAXPROCS"))))
	// fano with its WAL's writer on the kernel's own slice, the baseline
	// of the short one it asks for (wal.Options.WriterSlice).
	run := func(slice time.Duration) func(b *testing.B) {
		return func(b *testing.B) { benchEndToEnd(b, slice) }
	}
	b.Run("fano", run(0))
	b.Run("fano-kernel-slice", run(-1))
	// The floor: the same writes (entries, the archived task, the closed
	// intent: written-KB/task shows both) in the groups fano waits on now
	// (submit; start + intent beside the quota; answer, module events and
	// completion queued back to back); and in the six groups it waited on
	// before (see taskLife), for comparison. wal-floor is #18's "fano's
	// own storage floor (same writes, no actors)": like the floor of the
	// issue's table, it makes each task's entries as it writes them, and
	// does the work they record (the simulated answer, the probe's
	// decision, the archived task) with no actor between.
	b.Run("wal-floor", func(b *testing.B) {
		walFloor(b, tasks, true, false, func(t *pb.Task) [][]wal.Entry { return waitsNow(archivedLife(t)) })
	})
	// The same with every entry made before the clock starts: the disk's
	// and the WAL's share alone, a bound no system that makes its entries
	// as it goes reaches (wal-floor, with no actors, makes 58-72 % of its
	// tasks/s).
	b.Run("wal-floor-premade", func(b *testing.B) {
		walFloor(b, tasks, true, true, func(t *pb.Task) [][]wal.Entry { return waitsNow(archivedLife(t)) })
	})
	b.Run("wal-floor-six-waits", func(b *testing.B) { walFloor(b, tasks, false, false, archivedLife) })
}

// endToEndTasks is how many tasks BenchmarkEndToEnd runs.
const endToEndTasks = 20000

// benchEndToEnd is BenchmarkEndToEnd's fano, its WAL's writer
// on slice (wal.Options.WriterSlice).
func benchEndToEnd(b *testing.B, slice time.Duration) {
	const tasks = endToEndTasks
	for i := 0; i < b.N; i++ {
		runtime.GC()
		bu := setup(&testing.T{}, setupOpts{backends: []string{"api"}, conc: 64, hourly: 1 << 30,
			probe:  probe.Config{NoPropose: true, Turns: 1, TaskType: benchTaskType},
			noSync: benchNoSync(), walSlice: slice})
		bu.t = nil
		bu.opts.TickInterval = 100 * time.Millisecond
		completed := awaitCompletions(&bu.opts, tasks)
		sys, err := Start(bu.opts)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		cpu0 := processCPU()
		duty0 := bu.file.Duty()
		msgs0 := messagesPosted(sys)
		var ms0 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		peak := heapPeak()
		var wg sync.WaitGroup
		for w := 0; w < 64; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for _, js := range producerBatches(w, tasks) {
					batch := make([]*pb.Task, len(js))
					for k, j := range js {
						batch[k] = benchTask(j)
					}
					rs, err := sys.SubmitBatch(batch)
					if err != nil {
						panic(err)
					}
					for _, r := range rs {
						if !r.Accepted {
							panic(fmt.Sprint(r))
						}
					}
				}
			}(w)
		}
		completed(b, 5*time.Minute)
		elapsed := time.Since(start)
		duty := bu.file.Duty()
		cpu := processCPU() - cpu0
		var ms1 runtime.MemStats
		runtime.ReadMemStats(&ms1)
		wg.Wait()
		b.ReportMetric(float64(tasks)/elapsed.Seconds(), "tasks/s")
		b.ReportMetric(float64(cpu.Microseconds())/tasks, "cpu-µs/task")
		reportDuty(b, tasks, elapsed, duty0, duty)
		// Messages between the long-lived actors: each is a hop (a
		// mailbox post, often a goroutine woken).
		b.ReportMetric(float64(messagesPosted(sys)-msgs0)/tasks, "msgs/task")
		// Allocations per task: the collector's work follows them, and
		// unlike CPU time they hardly move when the cores are shared.
		b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/tasks, "allocs/task")
		b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/1024/tasks, "alloc-KB/task")
		b.ReportMetric(rssMB(), "rss-MB")
		b.ReportMetric(procStatusMB("RssFile:"), "rss-file-MB")
		b.ReportMetric(procStatusMB("RssAnon:"), "rss-anon-MB")
		b.ReportMetric(peak(), "peak-heap-MB")
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "live-heap-MB")
		if f := os.Getenv("FANO_BENCH_HEAPPROFILE"); f != "" {
			if out, err := os.Create(f); err == nil {
				_ = pprof.WriteHeapProfile(out)
				out.Close()
			}
		}
		if st, err := bu.log.Stats(); err == nil && st.Blocks > 0 {
			b.ReportMetric(float64(st.Entries)/float64(st.Blocks), "entries/commit")
		}
		_ = sys.Stop()
		_ = bu.file.Close()
		os.RemoveAll(bu.dir)
	}
}

// awaitCompletions has opts observe task completions. The function it
// returns waits until n tasks have completed, and fails b if they have
// not within the time given.
func awaitCompletions(opts *Options, n int) func(b *testing.B, within time.Duration) {
	var done atomic.Int64
	all := make(chan struct{})
	opts.Observe = func(_ string, e *pb.Event) {
		if e.GetTaskCompleted() != nil && done.Add(1) == int64(n) {
			close(all)
		}
	}
	return func(b *testing.B, within time.Duration) {
		select {
		case <-all:
		case <-time.After(within):
			b.Fatalf("only %d of %d completed", done.Load(), n)
		}
	}
}

// benchSubmitBatch is how many tasks a producer of BenchmarkEndToEnd
// submits at once.
const benchSubmitBatch = 100

// producerBatches is the task numbers producer w of 64 submits, in
// batches of benchSubmitBatch.
func producerBatches(w, tasks int) [][]int {
	var out [][]int
	var cur []int
	for j := w; j < tasks; j += 64 {
		cur = append(cur, j)
		if len(cur) == benchSubmitBatch {
			out = append(out, cur)
			cur = nil
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// messagesPosted counts the user messages posted so far to the
// long-lived actors (not to executors, which are no mailboxes).
func messagesPosted(sys *System) int64 {
	ids := []string{sys.orchestratorPID.Id, sys.schedulerPID.Id, sys.allocatorPID.Id}
	for _, pid := range sys.modulePIDs {
		ids = append(ids, pid.Id)
	}
	for _, pid := range sys.gatewayPIDs {
		ids = append(ids, pid.Id)
	}
	return sys.mailboxes.posted(ids...)
}

// waitsNow regroups a task's WAL traffic (taskLife) the way fano waits on
// it since the start joined the intent and the answer, the module's
// events and the completion stopped waiting for each other's fsync.
func waitsNow(life [][]wal.Entry) [][]wal.Entry {
	join := func(gs ...[]wal.Entry) []wal.Entry {
		var out []wal.Entry
		for _, g := range gs {
			out = append(out, g...)
		}
		return out
	}
	return [][]wal.Entry{life[0], join(life[1], life[2], life[3]), join(life[4], life[5])}
}

// walFloor writes tasks' WAL traffic straight to a WAL from 64 goroutines,
// each waiting on the groups life returns in turn, with no actors. With
// batchSubmits a goroutine writes the first group (the submit) of a
// producer batch's tasks in one append, then each task's other groups.
// With premade every task's traffic is made before the clock starts.
func walFloor(b *testing.B, tasks int, batchSubmits, premade bool, life func(*pb.Task) [][]wal.Entry) {
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		log, err := wal.Open(filepath.Join(dir, "fano.db"), wal.Options{NoSync: benchNoSync()})
		if err != nil {
			b.Fatal(err)
		}
		// A producer batch's entries, made as the batch is written, or
		// before the clock starts with premade (the writes alone timed).
		type producerBatch struct {
			submits []wal.Entry
			lives   [][][]wal.Entry
		}
		made := func(js []int) producerBatch {
			var pbt producerBatch
			for _, j := range js {
				life := life(benchTask(j))
				if batchSubmits {
					pbt.submits = append(pbt.submits, life[0]...)
					life = life[1:]
				}
				pbt.lives = append(pbt.lives, life)
			}
			return pbt
		}
		var premades [][]producerBatch
		if premade {
			premades = make([][]producerBatch, 64)
			for w := range premades {
				for _, js := range producerBatches(w, tasks) {
					premades[w] = append(premades[w], made(js))
				}
			}
		}
		start := time.Now()
		cpu0 := processCPU()
		duty0 := log.Duty()
		var wg sync.WaitGroup
		for w := 0; w < 64; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				var intent uint64 // the seq of the task's request intent
				appendAll := func(es []wal.Entry) {
					floorAtAppend(es, intent)
					seqs, err := log.Append(context.Background(), es...)
					if err != nil {
						panic(err)
					}
					for i, e := range es {
						if e.Intent {
							intent = seqs[i]
						}
					}
				}
				for k, js := range producerBatches(w, tasks) {
					var pbt producerBatch
					if premade {
						pbt = premades[w][k]
					} else {
						pbt = made(js)
					}
					if batchSubmits {
						appendAll(pbt.submits)
					}
					for _, groups := range pbt.lives {
						for _, g := range groups {
							appendAll(g)
						}
					}
				}
			}(w)
		}
		wg.Wait()
		elapsed := time.Since(start)
		b.ReportMetric(float64(tasks)/elapsed.Seconds(), "tasks/s")
		b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(tasks), "cpu-µs/task")
		reportDuty(b, tasks, elapsed, duty0, log.Duty())
		_ = log.Close()
	}
}

// reportDuty reports what the WAL's writer did while tasks ran for
// elapsed (from before to after): the share of the time it was writing
// (writer-busy-%) and idle with nothing queued (writer-idle-%), and the
// tasks each group commit carried. A writer that is not busy waits on
// the system's own hops between one durable write and the next; one that
// is, on the disk.
func reportDuty(b *testing.B, tasks int, elapsed time.Duration, before, after wal.Duty) {
	commits := after.Commits - before.Commits
	if commits == 0 || elapsed <= 0 {
		return
	}
	b.ReportMetric(100*float64(after.Writing-before.Writing)/float64(elapsed), "writer-busy-%")
	b.ReportMetric(100*float64(after.Idle-before.Idle)/float64(elapsed), "writer-idle-%")
	b.ReportMetric(float64(tasks)/float64(commits), "tasks/commit")
	b.ReportMetric(float64(after.Bytes-before.Bytes)/1024/float64(tasks), "written-KB/task")
	b.ReportMetric(float64(after.Writing-before.Writing)/float64(commits)/float64(time.Microsecond), "µs/commit")
}

// benchNoSync: FANO_BENCH_NOSYNC=1 runs BenchmarkEndToEnd and its floor
// without fsync, so a CPU profile shows fano's own work, not the disk's.
func benchNoSync() bool { return os.Getenv("FANO_BENCH_NOSYNC") == "1" }

// processCPU is the CPU time (user + system) the process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// taskLife is the WAL traffic of one task, grouped the way fano waited on
// it until this round: submit; start; quota; request; answer + module
// event; completion (waitsNow: the groups of today). Its answer is
// benchAnswer, and the completion does not archive the task (see
// archivedLife).
func taskLife(t *pb.Task) [][]wal.Entry {
	return lifeOf(t, &pb.LLMResponseReceived{TaskId: t.Id, Llm: "api", Content: benchAnswer},
		[]*pb.ModuleEvent{{Module: probe.Name, Type: "answer_recorded", TaskId: t.Id}}, nil)
}

// benchAnswer is the answer of taskLife's request.
var benchAnswer = strings.Repeat("answer ", 40)

// lifeOf is a task's WAL traffic (see taskLife) with answer as its
// request's answer and module as the module's events for it; with archive
// set, the completion carries archive(now) to the archive and says so.
func lifeOf(t *pb.Task, answer *pb.LLMResponseReceived, module []*pb.ModuleEvent, archive func(now int64) *wal.ArchiveRecord) [][]wal.Entry {
	now := time.Now().UnixNano()
	answered := []wal.Entry{benchEntry(ownerScheduler, &pb.Event{At: now, Body: &pb.Event_LlmResponseReceived{LlmResponseReceived: answer}})}
	for _, me := range module {
		answered = append(answered, benchEntry(moduleOwner(me.Module), &pb.Event{At: now, Body: &pb.Event_ModuleEvent{ModuleEvent: me}}))
	}
	done := benchEntry(ownerScheduler, &pb.Event{At: now, Body: &pb.Event_TaskCompleted{TaskCompleted: &pb.TaskCompleted{TaskId: t.Id, Archived: archive != nil}}})
	if archive != nil {
		done.Archive = archive(now)
	}
	return [][]wal.Entry{
		{benchEntry(ownerScheduler, &pb.Event{At: now, Body: &pb.Event_TaskSubmitted{TaskSubmitted: &pb.TaskSubmitted{Task: t}}})},
		{benchEntry(ownerScheduler, &pb.Event{At: now, Body: &pb.Event_TaskStarted{TaskStarted: &pb.TaskStarted{TaskId: t.Id, Llm: "api"}}})},
		{benchEntry(ownerAllocator, &pb.Event{At: now, Body: &pb.Event_QuotaUsed{QuotaUsed: &pb.QuotaUsed{Backend: "api", TaskId: t.Id}}})},
		{benchEntry(ownerScheduler, &pb.Event{At: now, Body: &pb.Event_LlmRequestStarted{LlmRequestStarted: &pb.LLMRequestStarted{TaskId: t.Id, Llm: "api", Prompt: t.Context["question"]}}})},
		answered,
		{done},
	}
}

func benchEntry(owner string, e *pb.Event) wal.Entry {
	x, err := encodeEvent(owner, e)
	if err != nil {
		panic(err)
	}
	return x
}

// archivedLife is taskLife as fano's BenchmarkEndToEnd writes it, each
// event made by what makes fano's: the submitted task as the scheduler
// decides it (defaults filled in); the answer the one fano's run gets
// (the same simulated backend asked the same), with the call's
// measurements and its request's seq; the probe module's own events for
// the answer and the task's end (the answer's text, then question_done);
// the completion carrying the finished task, conversation and all, to the
// archive (see archiveOnCompletion); and the answer closing its request's
// intent (walFloor sets the seq and the archive key as it writes them:
// floorAtAppend).
func archivedLife(t *pb.Task) [][]wal.Entry {
	prompt := t.Context["question"]
	sent := time.Now()
	resp, err := floorSim.Send(context.Background(), gateway.Request{TaskID: t.Id, Module: t.Module, TaskType: t.TaskType, Prompt: prompt})
	if err != nil {
		panic(err)
	}
	took := time.Since(sent)
	t = floorSubmitted(t)
	module, ended, end, err := floorProbe.DecideResponseEnd(t, resp.Content, time.Now())
	if err != nil || !ended {
		panic(fmt.Sprintf("probe: ended %v, err %v", ended, err))
	}
	// A seq of the magnitude fano's requests get in this run (about
	// eight entries a task): the same bytes on disk. walFloor cannot know
	// the real one before it writes the intent.
	reqSeq := uint64(8)
	if n, err := strconv.Atoi(strings.TrimPrefix(t.Subject, "b")); err == nil {
		reqSeq = uint64(8*n + 4)
	}
	response := &pb.LLMResponseReceived{TaskId: t.Id, Llm: "api", Content: resp.Content, RequestSeq: reqSeq, DurationNs: int64(took),
		ConversationUrl: resp.ConversationURL, PromptTokens: resp.PromptTokens, CompletionTokens: resp.CompletionTokens}
	module = append(module, end...)
	for _, me := range module {
		me.Module = probe.Name
	}
	return lifeOf(t, response, module, func(now int64) *wal.ArchiveRecord {
		// The task as the scheduler has it once these events apply: what
		// fano archives at the completion (decided on the completion
		// before it says archived: archiveOnCompletion).
		finished := pb.CloneTask(t)
		for _, ev := range []*pb.Event{
			{At: now, Body: &pb.Event_TaskStarted{TaskStarted: &pb.TaskStarted{TaskId: t.Id, Llm: "api"}}},
			{At: now, Body: &pb.Event_LlmRequestStarted{LlmRequestStarted: &pb.LLMRequestStarted{TaskId: t.Id, Llm: "api", Prompt: prompt}}},
			{At: now, Body: &pb.Event_LlmResponseReceived{LlmResponseReceived: response}},
			{At: now, Body: &pb.Event_TaskCompleted{TaskCompleted: &pb.TaskCompleted{TaskId: t.Id}}},
		} {
			if err := scheduler.ApplyToTask(finished, ev, 50); err != nil {
				panic(err)
			}
		}
		data, err := pb.MarshalTask(finished)
		if err != nil {
			panic(err)
		}
		return &wal.ArchiveRecord{Key: t.Id, Value: data}
	})
}

// floorProbe decides the floor's module events as fano's probe module
// decides them (the configuration of BenchmarkEndToEnd's). It only reads
// its state, which nothing changes: safe from the floor's goroutines.
var floorProbe = probe.New(probe.Config{NoPropose: true, Turns: 1, TaskType: benchTaskType})

// floorDefaults is what fano's scheduler (setup's configuration) fills in
// when a bench task is submitted, decided once: every bench task gets the
// same, and one scheduler shared by the floor's goroutines would make
// them queue for it.
var floorDefaults = sync.OnceValue(func() *pb.Task {
	ev, err := scheduler.New(scheduler.Config{PreemptionThreshold: 20, MaxPending: 100000, MessageLimit: 50}).DecideSubmit(benchTask(0), time.Now())
	if err != nil {
		panic(err)
	}
	return ev.GetTaskSubmitted().GetTask()
})

// floorSubmitted is t as the scheduler's submit event holds it.
func floorSubmitted(t *pb.Task) *pb.Task {
	d, now := floorDefaults(), time.Now().UnixNano()
	nt := pb.CloneTask(t)
	nt.State, nt.CreatedAt, nt.UpdatedAt = d.State, now, now
	nt.MessageLimit, nt.BasePriority, nt.Priority = d.MessageLimit, d.BasePriority, d.Priority
	return nt
}

// floorSim answers the floor's requests as BenchmarkEndToEnd's backend
// answers fano's (fanotest.Sims: the first backend, style api).
var floorSim = sim.New(sim.Config{Name: "api", Style: "api", Seed: 1}, nil)

// floorAtAppend readies es as fano's journal does when it writes them:
// the answer closes the request intent written at seq, and an archived
// task lies under its completion key of now (keys in completion order,
// as fano's grow).
func floorAtAppend(es []wal.Entry, seq uint64) {
	for i := range es {
		if es[i].Type == "llm_response_received" {
			es[i].Closes = seq
		}
		if a := es[i].Archive; a != nil {
			es[i].Archive = &wal.ArchiveRecord{Key: completedKey(&pb.Task{Id: a.Key, CompletedAt: time.Now().UnixNano()}), Value: a.Value}
		}
	}
}

// BenchmarkRecovery: 100,000 tasks and about 1M WAL entries since the last
// checkpoint. Goal: <= 2 s. Baseline in the same run: reading and decoding
// the same entries without applying them.
func BenchmarkRecovery(b *testing.B) {
	const tasks = 100000
	dir := b.TempDir()
	path := filepath.Join(dir, "fano.db")
	log, err := wal.Open(path, wal.Options{NoSync: true})
	require.NoError(b, err)
	var batch []wal.Entry
	flush := func() {
		seqs, err := log.Append(context.Background(), batch...)
		if err != nil {
			b.Fatal(err)
		}
		// Answered requests are committed, as fano does as it goes.
		var answered []uint64
		for i, e := range batch {
			if e.Intent && i+1 < len(batch) && batch[i+1].Type == "llm_response_received" {
				// (the request just before its answer)
				answered = append(answered, seqs[i])
			}
		}
		if err := log.Commit(context.Background(), answered...); err != nil {
			b.Fatal(err)
		}
		batch = batch[:0]
	}
	for i := 0; i < tasks; i++ {
		t := benchTask(i)
		t.MaxRequests = 2
		life := taskLife(t)
		// submit, start, then two turns of quota + request + answer (+ module
		// event), and completion for all but one task in a hundred (left
		// running): about 11 entries a task.
		for _, g := range life[:2] {
			batch = append(batch, g...)
		}
		for turn := 0; turn < 2; turn++ {
			for _, g := range life[2:5] {
				batch = append(batch, g...)
			}
		}
		if i%100 != 0 {
			batch = append(batch, life[5]...)
		}
		if len(batch) > 20000 {
			flush()
		}
	}
	flush()
	st, err := log.Stats()
	require.NoError(b, err)
	b.ReportMetric(float64(st.Entries), "entries")

	opts := Options{Log: log, Scheduler: scheduler.Config{MaxPending: 1 << 20, MessageLimit: 50},
		Modules: nil, Dry: true}
	opts.Modules = append(opts.Modules, probe.New(probe.Config{NoPropose: true, Turns: 2, TaskType: benchTaskType}))
	opts.Allocator = allocator.Config{Backends: []allocator.BackendConfig{{Name: "api", Kind: "sim", HourlyLimit: 1 << 30, MaxConcurrency: 64}}}
	opts.Backends = []gateway.Backend{sim.New(sim.Config{Name: "api", Style: "api"}, nil)}
	b.Run("fano-recover", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			start := time.Now()
			rep, err := Recover(opts)
			if err != nil {
				b.Fatal(err)
			}
			if rep.TasksRecovered != tasks {
				b.Fatalf("recovered %d tasks", rep.TasksRecovered)
			}
			b.ReportMetric(time.Since(start).Seconds(), "s/recovery")
		}
	})
	b.Run("decode-only", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			start := time.Now()
			n := 0
			err := log.Replay(1, func(e wal.Entry) error {
				var ev pb.Event
				n++
				return proto.Unmarshal(e.Payload, &ev)
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(time.Since(start).Seconds(), "s/recovery")
		}
	})
	_ = log.Close()
}

// heapPeak samples the heap's live-and-garbage objects (runtime/metrics,
// no stop of the world) every 20 ms until stop returns the highest in MB:
// resident memory follows the peak, not the end.
func heapPeak() (stop func() float64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak uint64
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	return func() float64 {
		close(quit)
		<-done
		return float64(peak) / (1 << 20)
	}
}
