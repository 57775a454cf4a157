//go:build unix

package wal

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const sigkillChildEnv = "FANO_WAL_SIGKILL_CHILD"

// TestSIGKILL runs a child process (this test binary) that appends from
// several goroutines and prints every acknowledged seq; after 2000 acks
// the child is killed with SIGKILL. Every acknowledged entry must be in
// the log with its payload.
func TestSIGKILL(t *testing.T) {
	if dir := os.Getenv(sigkillChildEnv); dir != "" {
		sigkillChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSIGKILL$")
	cmd.Env = append(os.Environ(), sigkillChildEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})

	acked := map[uint64]string{}
	got := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var (
				seq     uint64
				payload string
			)
			if _, err := fmt.Sscanf(sc.Text(), "ack %d %s", &seq, &payload); err != nil {
				continue // test framework output
			}
			acked[seq] = payload
			if len(acked) == 2000 {
				got <- nil
				return
			}
		}
		got <- fmt.Errorf("child output ended after %d acks: %v", len(acked), sc.Err())
	}()
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(2 * time.Minute): // a deadline for a broken test
		t.Fatal("child too slow")
	}
	require.NoError(t, cmd.Process.Kill()) // SIGKILL
	killed = true
	_ = cmd.Wait()

	opts := testOptions()
	opts.PIDFile = filepath.Join(dir, "fano.pid")
	l := openTest(t, filepath.Join(dir, "fano.db"), opts)
	require.Equal(t, cmd.Process.Pid, l.StalePID())
	found := map[uint64]string{}
	require.NoError(t, l.Replay(1, func(e Entry) error {
		found[e.Seq] = string(e.Payload)
		return nil
	}))
	for seq, payload := range acked {
		require.Equal(t, payload, found[seq], "acknowledged seq %d", seq)
	}
	require.GreaterOrEqual(t, l.LastSeq(), uint64(2000))
	next := appendT(t, l, ent("a", "t", "after"))
	require.Equal(t, l.LastSeq(), next[0])
}

// sigkillChild appends forever from 4 goroutines, printing each
// acknowledged seq and payload with one write.
func sigkillChild(dir string) {
	l, err := Open(filepath.Join(dir, "fano.db"), Options{PIDFile: filepath.Join(dir, "fano.pid")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for g := range 4 {
		go func() {
			for i := 0; ; i++ {
				n := 1 + i%3
				es := make([]Entry, n)
				for j := range es {
					es[j] = Entry{Owner: "child", Type: "t", Payload: []byte(fmt.Sprintf("g%d-i%d-j%d", g, i, j))}
				}
				seqs, err := l.Append(context.Background(), es...)
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				var b strings.Builder
				for j, s := range seqs {
					fmt.Fprintf(&b, "ack %d %s\n", s, es[j].Payload)
				}
				_, _ = os.Stdout.WriteString(b.String())
			}
		}()
	}
	select {} // until killed
}
