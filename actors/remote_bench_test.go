package actors

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"fano/config"
	"fano/gateway"
	"fano/gateway/sim"
	"fano/modules/probe"
	"fano/pb"
	"fano/remote"
)

// remoteBenchTasks is how many tasks BenchmarkRemoteGateway runs a side.
const remoteBenchTasks = 5000

// BenchmarkRemoteGateway: durable tasks/s end to end, 64 running, each
// one zero-latency sim call, with the sim backend on a gateway host over
// protoactor-go remote on loopback beside the same backend local, in the
// same run. The host runs as a second actor system in this process
// (plaintext and mTLS), and as its own process (this binary re-executed,
// mTLS, with `fano gateway serve`'s memory limit), the shape it has in
// use: there it has its own heap and scheduler, and shares only the
// machine's cores. One round of each side first warms the process up and
// is not counted; then rounds of every side back to back, each round in
// another order, so a busy machine (and whatever the side before left
// behind) weighs on each side alike; the medians and the median of each
// round's ratio. Goal: remote >= 80 % of local. The CPU each task took
// (the orchestrator's, hub's and host's, in either process) is reported
// beside: it shows what the remote path costs even when other work on
// the machine moves the rates.
func BenchmarkRemoteGateway(b *testing.B) {
	const rounds = 5
	modes := []string{"", "remote-plaintext", "remote-mtls", "remote-process-mtls"}
	for _, mode := range modes {
		benchRemoteGateway(b, mode) // warm-up
	}
	rates := map[string][]float64{}
	cpus := map[string][]float64{}
	ratios := map[string][]float64{}
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			got := map[string]float64{}
			for k := range modes {
				mode := modes[(k+r)%len(modes)]
				rate, cpu := benchRemoteGateway(b, mode)
				rates[mode] = append(rates[mode], rate)
				cpus[mode] = append(cpus[mode], cpu)
				got[mode] = rate
			}
			for _, mode := range modes[1:] {
				ratios[mode] = append(ratios[mode], 100*got[mode]/got[""])
			}
		}
	}
	b.ReportMetric(median(rates[""]), "local-tasks/s")
	b.ReportMetric(median(cpus[""]), "local-cpu-µs/task")
	for _, mode := range modes[1:] {
		b.ReportMetric(median(rates[mode]), mode+"-tasks/s")
		b.ReportMetric(median(cpus[mode]), mode+"-cpu-µs/task")
		b.ReportMetric(median(ratios[mode]), mode+"-%-of-local")
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// benchRemoteGateway runs one side and returns its tasks/s and the CPU
// µs a task took.
func benchRemoteGateway(b *testing.B, mode string) (rate, cpuPerTask float64) {
	const tasks = remoteBenchTasks
	{
		runtime.GC()
		bu := setup(&testing.T{}, setupOpts{backends: []string{"api"}, conc: 64, hourly: 1 << 30,
			probe: probe.Config{NoPropose: true, Turns: 1, TaskType: benchTaskType}, noSync: benchNoSync()})
		bu.t = nil
		bu.opts.TickInterval = 100 * time.Millisecond
		var closers []func()
		hostCPU := func() time.Duration { return 0 }
		if mode != "" {
			hubT := remote.Transport{Listen: "127.0.0.1:0", Plaintext: mode == "remote-plaintext"}
			hostT := remote.Transport{Listen: "127.0.0.1:0", Plaintext: hubT.Plaintext}
			var bundle string
			if !hubT.Plaintext {
				hubT.Identity, hostT.Identity, bundle = benchIdentities(b)
			}
			connected := make(chan struct{})
			var once sync.Once
			hub, err := remote.StartHub(remote.HubConfig{Transport: hubT, Version: "bench", Ledger: "bench",
				Routed: map[string][]string{"desk": {"api"}}, Logger: zerolog.Nop(),
				OnChange: func(st remote.HostStatus) {
					if st.State == remote.HostConnected {
						once.Do(func() { close(connected) })
					}
				}})
			if err != nil {
				b.Fatal(err)
			}
			if mode == "remote-process-mtls" {
				stop, cpu := startBenchHostProcess(b, hub.Address(), bundle)
				closers = append(closers, stop)
				hostCPU = cpu
			} else {
				host, err := remote.StartHost(remote.HostConfig{Name: "desk", Version: "bench", Orchestrator: hub.Address(),
					Transport: hostT, Backends: []gateway.Backend{bu.sims[0]}, Logger: zerolog.Nop()})
				if err != nil {
					b.Fatal(err)
				}
				closers = append(closers, host.Close)
			}
			<-connected
			bu.opts.Backends = []gateway.Backend{hub.Backend("api", "desk")}
			closers = append(closers, hub.Close)
		}
		completed := awaitCompletions(&bu.opts, tasks)
		sys, err := Start(bu.opts)
		if err != nil {
			b.Fatal(err)
		}
		start, cpu, cpuHost := time.Now(), processCPU(), hostCPU()
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
					if _, err := sys.SubmitBatch(batch); err != nil {
						panic(fmt.Sprint(err))
					}
				}
			}(w)
		}
		completed(b, 5*time.Minute)
		elapsed := time.Since(start)
		wg.Wait()
		rate = float64(tasks) / elapsed.Seconds()
		cpuPerTask = float64((processCPU() - cpu + hostCPU() - cpuHost).Microseconds()) / tasks
		_ = sys.Stop()
		for _, c := range closers {
			c()
		}
		_ = bu.file.Close()
	}
	return rate, cpuPerTask
}

// benchIdentities makes a CA, the orchestrator's certificate and host
// desk's, in a temporary directory; bundle is desk's bundle file.
func benchIdentities(b *testing.B) (orch, host *remote.Identity, bundle string) {
	dir := b.TempDir()
	if err := remote.Init(dir, time.Now()); err != nil {
		b.Fatal(err)
	}
	data, err := remote.Enroll(dir, "desk", "127.0.0.1:1", time.Now())
	if err != nil {
		b.Fatal(err)
	}
	bundle = dir + "/desk.bundle"
	if err := remote.WriteBundle(bundle, data); err != nil {
		b.Fatal(err)
	}
	if _, host, err = remote.LoadBundle(bundle); err != nil {
		b.Fatal(err)
	}
	if orch, err = remote.OrchestratorIdentity(dir); err != nil {
		b.Fatal(err)
	}
	return orch, host, bundle
}

// The test binary doubles as BenchmarkRemoteGateway's host process:
// FANO_BENCH_GATEWAY_HOST=<orchestrator address> with
// FANO_BENCH_GATEWAY_BUNDLE=<desk's bundle> serves the bench's sim
// backend until its stdin closes.
const (
	envBenchHost   = "FANO_BENCH_GATEWAY_HOST"
	envBenchBundle = "FANO_BENCH_GATEWAY_BUNDLE"
)

func init() {
	if orch := os.Getenv(envBenchHost); orch != "" {
		os.Exit(benchHostProcess(orch, os.Getenv(envBenchBundle)))
	}
}

func benchHostProcess(orchestrator, bundle string) int {
	// As `fano gateway serve` does by default (gateway.memory_limit_mb).
	debug.SetMemoryLimit(config.DefaultGatewayMemoryLimitMB << 20)
	_, id, err := remote.LoadBundle(bundle)
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	// The bench's backend as setup makes it (fanotest.Sims).
	be := sim.New(sim.Config{Name: "api", Style: "api", Seed: 1, HourlyLimit: 1 << 30}, clockwork.NewRealClock())
	h, err := remote.StartHost(remote.HostConfig{Name: "desk", Version: "bench", Orchestrator: orchestrator,
		Transport: remote.Transport{Listen: "127.0.0.1:0", Identity: id}, Backends: []gateway.Backend{be}, Logger: zerolog.Nop()})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	fmt.Println("SERVING", h.Address())
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the bench closes it
	h.Close()
	return 0
}

// startBenchHostProcess starts the host process; stop ends it, cpu is
// the CPU it has used so far.
func startBenchHostProcess(b *testing.B, orchestrator, bundle string) (stop func(), cpu func() time.Duration) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envBenchHost+"="+orchestrator, envBenchBundle+"="+bundle)
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, "SERVING") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		b.Fatalf("the host process did not start: %q", line)
	}
	stop = func() {
		_ = in.Close()
		_ = cmd.Wait()
	}
	return stop, func() time.Duration { return processCPUOf(b, cmd.Process.Pid) }
}

// processCPUOf is the CPU time (user and system) process pid has used,
// from /proc (in clock ticks of 10 ms).
func processCPUOf(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command (which may hold spaces) start after
	// its closing parenthesis; utime and stime are the 14th and 15th.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
