//go:build !race

package remote

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"fano/gateway"
)

// BenchmarkRemoteLatency: one request at a time to a zero-latency sim
// backend, local and through a gateway host on loopback (plaintext and
// mTLS), in the same run: p50 and p99 of each, and what the host adds.
func BenchmarkRemoteLatency(b *testing.B) {
	const n = 2000
	measure := func(b *testing.B, backend gateway.Backend) (p50, p99 time.Duration) {
		ds := make([]time.Duration, 0, n)
		for i := 0; i < n; i++ {
			start := time.Now()
			if _, err := backend.Send(context.Background(), request(uint64(i+1), "what is a Fano plane?")); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(start))
		}
		slices.Sort(ds)
		return ds[n/2], ds[n*99/100]
	}
	var l50, l99 time.Duration
	b.Run("local", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			l50, l99 = measure(b, newSim("s1"))
		}
		b.ReportMetric(float64(l50.Microseconds()), "p50-µs")
		b.ReportMetric(float64(l99.Microseconds()), "p99-µs")
	})
	for _, mode := range []string{"remote-plaintext", "remote-mtls"} {
		b.Run(mode, func(b *testing.B) {
			var hub *watchedHub
			var host *Host
			if mode == "remote-plaintext" {
				hub = startBenchHub(b, HubConfig{Transport: Transport{Plaintext: true}})
				host = startBenchHost(b, HostConfig{Orchestrator: hub.Address(), Transport: Transport{Listen: "127.0.0.1:0", Plaintext: true}})
			} else {
				dataDir, ids := enrolled(b, "desk")
				id, err := OrchestratorIdentity(dataDir)
				if err != nil {
					b.Fatal(err)
				}
				hub = startBenchHub(b, HubConfig{Transport: Transport{Identity: id}})
				host = startBenchHost(b, HostConfig{Orchestrator: hub.Address(), Transport: Transport{Listen: "127.0.0.1:0", Identity: ids["desk"]}})
			}
			defer hub.Close()
			defer host.Close()
			hub.waitFor(b, "desk", HostConnected, 20*time.Second)
			var p50, p99 time.Duration
			for i := 0; i < b.N; i++ {
				p50, p99 = measure(b, hub.Backend("s1", "desk"))
			}
			b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
			b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
			b.ReportMetric(float64((p50 - l50).Microseconds()), "added-p50-µs")
			b.ReportMetric(float64((p99 - l99).Microseconds()), "added-p99-µs")
		})
	}
}

func startBenchHub(b *testing.B, cfg HubConfig) *watchedHub {
	w := &watchedHub{changes: make(chan HostStatus, 1024), log: newLogBuffer()}
	cfg.Transport.Listen = "127.0.0.1:0"
	cfg.Version, cfg.Ledger, cfg.Routed = "v-test", "bench", map[string][]string{"desk": {"s1", "s2", "s3"}}
	cfg.Logger = w.log.logger()
	cfg.OnChange = func(st HostStatus) {
		select {
		case w.changes <- st:
		default:
		}
	}
	h, err := StartHub(cfg)
	if err != nil {
		b.Fatal(err)
	}
	w.Hub = h
	return w
}

func startBenchHost(b *testing.B, cfg HostConfig) *Host {
	cfg.Name, cfg.Version, cfg.Logger = "desk", "v-test", newLogBuffer().logger()
	cfg.Backends = []gateway.Backend{newSim("s1")}
	h, err := StartHost(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// BenchmarkHostMemory: the resident memory of a host process holding 3
// sim backends after serving requests, beside the same test binary
// re-executed idle (the floor any process of it has), in the same run.
// Goal: <= 30 MB.
func BenchmarkHostMemory(b *testing.B) {
	idle := exec.Command(os.Args[0], "-test.run=^$")
	idle.Env = append(os.Environ(), "FANO_REMOTE_TEST_IDLE=1")
	out, err := idle.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := idle.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = idle.Process.Kill(); _ = idle.Wait() }()
	buf := make([]byte, 64)
	if _, err := out.Read(buf); err != nil { // "IDLE": it is up
		b.Fatal(err)
	}
	hub := startBenchHub(b, HubConfig{Transport: Transport{Plaintext: true}})
	defer hub.Close()
	for i := 0; i < b.N; i++ {
		p := startHostProcess(b, hub.Address(), "127.0.0.1:0")
		hub.waitFor(b, "desk", HostConnected, 20*time.Second)
		for j, name := range []string{"s1", "s2", "s3"} {
			be := hub.Backend(name, "desk")
			for k := 0; k < 1000; k++ {
				if _, err := be.Send(context.Background(), request(uint64(j*10000+k+1), "a prompt of some length "+strings.Repeat("x", 200))); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(rssOf(b, p.cmd.Process.Pid), "host-rss-MB")
		b.ReportMetric(rssOf(b, idle.Process.Pid), "idle-binary-rss-MB")
		_ = p.cmd.Process.Kill()
		hub.waitFor(b, "desk", HostLost, 20*time.Second)
	}
}

func rssOf(b *testing.B, pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(l, "VmRSS:"), "kB")))
			return float64(kb) / 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// BenchmarkRemoteCalls: 64 callers at once, each a stream of requests
// to a zero-latency sim backend, through a host on loopback (plaintext)
// and, in the same run, to the same backend local: calls/s and the CPU
// a call took (the process's: hub, host and backend). What the host path
// adds is the difference.
func BenchmarkRemoteCalls(b *testing.B) {
	const callers, each = 64, 300
	run := func(be gateway.Backend, first uint64) (perSec, cpuMicros float64) {
		start, cpu := time.Now(), processCPU()
		var wg sync.WaitGroup
		for c := 0; c < callers; c++ {
			wg.Add(1)
			go func(c uint64) {
				defer wg.Done()
				for k := uint64(0); k < each; k++ {
					req := gateway.Request{TaskID: "bench/t/" + strconv.FormatUint(c, 10), TaskType: "echo",
						Prompt: "what is a Fano plane?", IntentSeq: first + c*each + k}
					if _, err := be.Send(context.Background(), req); err != nil {
						panic(err)
					}
				}
			}(uint64(c))
		}
		wg.Wait()
		n := float64(callers * each)
		return n / time.Since(start).Seconds(), float64((processCPU() - cpu).Microseconds()) / n
	}
	hub := startBenchHub(b, HubConfig{Transport: Transport{Plaintext: true}})
	defer hub.Close()
	host := startBenchHost(b, HostConfig{Orchestrator: hub.Address(), Transport: Transport{Listen: "127.0.0.1:0", Plaintext: true}})
	defer host.Close()
	hub.waitFor(b, "desk", HostConnected, 20*time.Second)
	local, remote := newSim("s1"), hub.Backend("s1", "desk")
	var lRate, lCPU, rRate, rCPU []float64
	for i := 0; i < b.N; i++ {
		for round := 0; round < 3; round++ {
			first := uint64(i*3+round+1) * callers * each
			r, c := run(local, first)
			lRate, lCPU = append(lRate, r), append(lCPU, c)
			r, c = run(remote, first)
			rRate, rCPU = append(rRate, r), append(rCPU, c)
		}
	}
	b.ReportMetric(medianOf(lRate), "local-calls/s")
	b.ReportMetric(medianOf(lCPU), "local-cpu-µs/call")
	b.ReportMetric(medianOf(rRate), "remote-calls/s")
	b.ReportMetric(medianOf(rCPU), "remote-cpu-µs/call")
	b.ReportMetric(medianOf(rCPU)-medianOf(lCPU), "added-cpu-µs/call")
}

func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
