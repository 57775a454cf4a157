package browser

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// chromiumMemory returns the memory of the Chromium running on profileDir
// with all its child processes (renderers, GPU, utility), in bytes, and
// how many processes that is. Memory is the proportional set size (shared
// pages split among the processes sharing them, so the sum is not
// inflated), or the resident set where PSS cannot be read. 0, 0: no such
// browser.
func chromiumMemory(profileDir string) (int64, int) {
	roots, children := chromiumProcesses(profileDir)
	seen := map[int]bool{}
	var total int64
	var walk func(int)
	walk = func(pid int) {
		if seen[pid] {
			return
		}
		seen[pid] = true
		total += processMemory(pid)
		for _, c := range children[pid] {
			walk(c)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	return total, len(seen)
}

// chromiumProcesses returns the browser processes started on profileDir
// and every process's children.
func chromiumProcesses(profileDir string) (roots []int, children map[int][]int) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, nil
	}
	children = map[int][]int{}
	flag := []byte("--user-data-dir=" + profileDir)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], pid)
		if cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && bytes.Contains(cmd, flag) {
			roots = append(roots, pid)
		}
	}
	return roots, children
}

// processMemory is one process's PSS (else RSS) in bytes; 0 if gone.
func processMemory(pid int) int64 {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	if f, err := os.Open(filepath.Join(dir, "smaps_rollup")); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
				kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				if err == nil {
					return kb * 1024
				}
			}
		}
	}
	statm, err := os.ReadFile(filepath.Join(dir, "statm"))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(statm))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// memoryFresh is how long a reading is reused: the panel, /metrics and
// every request ask, and a reading walks all of /proc.
const memoryFresh = 10 * time.Second

// MemoryBytes implements gateway.MemoryReporter: the memory of this
// backend's Chromium and its child processes (0 when no browser runs), as
// read at most memoryFresh ago.
func (b *Backend) MemoryBytes() int64 {
	b.memMu.Lock()
	defer b.memMu.Unlock()
	now := b.clock.Now()
	if b.memBytes > 0 && now.Sub(b.memAt) < memoryFresh {
		return b.memBytes
	}
	b.memBytes, _ = chromiumMemory(b.cfg.ProfileDir)
	b.memAt = now
	return b.memBytes
}
