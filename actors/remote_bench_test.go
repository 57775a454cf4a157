package actors

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"fano/gateway"
	"fano/modules/probe"
	"fano/pb"
	"fano/remote"
)

// remoteBenchTasks is how many tasks BenchmarkRemoteGateway runs a side.
const remoteBenchTasks = 5000

// BenchmarkRemoteGateway: durable tasks/s end to end, 64 running, each
// one zero-latency sim call, with the sim backend on a gateway host (a
// second actor system on loopback, over protoactor-go remote, plaintext
// and mTLS) beside the same backend local, in the same run. One round of
// each side first warms the process up and is not counted; then rounds
// of local, remote-plaintext and remote-mtls back to back, each round in
// another order, so a busy machine (and whatever the side before left
// behind) weighs on each side alike; the medians and the median of each
// round's ratio. Goal: remote >= 80 % of local. The CPU each task took
// (the process's: orchestrator, hub and host alike) is reported beside:
// it shows what the remote path costs even when other work on the
// machine moves the rates.
func BenchmarkRemoteGateway(b *testing.B) {
	const rounds = 5
	modes := []string{"", "remote-plaintext", "remote-mtls"}
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
		if mode != "" {
			hubT := remote.Transport{Listen: "127.0.0.1:0", Plaintext: mode == "remote-plaintext"}
			hostT := remote.Transport{Listen: "127.0.0.1:0", Plaintext: hubT.Plaintext}
			if !hubT.Plaintext {
				hubT.Identity, hostT.Identity = benchIdentities(b)
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
			host, err := remote.StartHost(remote.HostConfig{Name: "desk", Version: "bench", Orchestrator: hub.Address(),
				Transport: hostT, Backends: []gateway.Backend{bu.sims[0]}, Logger: zerolog.Nop()})
			if err != nil {
				b.Fatal(err)
			}
			<-connected
			bu.opts.Backends = []gateway.Backend{hub.Backend("api", "desk")}
			closers = append(closers, host.Close, hub.Close)
		}
		completed := awaitCompletions(&bu.opts, tasks)
		sys, err := Start(bu.opts)
		if err != nil {
			b.Fatal(err)
		}
		start, cpu := time.Now(), processCPU()
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
		cpuPerTask = float64((processCPU() - cpu).Microseconds()) / tasks
		_ = sys.Stop()
		for _, c := range closers {
			c()
		}
		_ = bu.file.Close()
	}
	return rate, cpuPerTask
}

// benchIdentities makes a CA, the orchestrator's certificate and host
// desk's, in a temporary directory.
func benchIdentities(b *testing.B) (orch, host *remote.Identity) {
	dir := b.TempDir()
	if err := remote.Init(dir, time.Now()); err != nil {
		b.Fatal(err)
	}
	bundle, err := remote.Enroll(dir, "desk", "127.0.0.1:1", time.Now())
	if err != nil {
		b.Fatal(err)
	}
	path := dir + "/desk.bundle"
	if err := remote.WriteBundle(path, bundle); err != nil {
		b.Fatal(err)
	}
	if _, host, err = remote.LoadBundle(path); err != nil {
		b.Fatal(err)
	}
	if orch, err = remote.OrchestratorIdentity(dir); err != nil {
		b.Fatal(err)
	}
	return orch, host
}
