package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"fano/wal"
)

func newWALCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "wal", Short: "Look into or shrink fano's log of changes (fano.db in the data directory)"}
	var from uint64
	var limit int
	inspect := &cobra.Command{
		Use:   "inspect",
		Short: "List the log's entries: sequence number, time, owner, type and size",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := openApp(g, "off")
			if err != nil {
				return err
			}
			defer a.close()
			return inspectWAL(cmd, g, a.log, from, limit)
		},
	}
	inspect.Flags().Uint64Var(&from, "from", 1, "first entry to list, by sequence number")
	inspect.Flags().IntVar(&limit, "limit", 100, "list at most this many entries (0: all)")
	jsonFlag(inspect, g)

	var shrink bool
	compact := &cobra.Command{
		Use:   "compact",
		Short: "Drop log entries that saved checkpoints already cover, to free space (fano must be stopped)",
		Long: "Drop the log entries that every saved checkpoint already covers; nothing fano knows is lost.\n" +
			"The file keeps its size unless --shrink also rewrites it without the freed pages.\n" +
			"fano must be stopped.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := openApp(g, "off")
			if err != nil {
				return err
			}
			res, err := a.log.Compact()
			path := filepath.Join(a.dataDir, "fano.db")
			if cerr := a.close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "compacted: %+v\n", res)
			if !shrink {
				return nil
			}
			return shrinkFile(cmd, path)
		},
	}
	compact.Flags().BoolVar(&shrink, "shrink", false, "rewrite the file without its free pages")
	cmd.AddCommand(inspect, compact)
	return cmd
}

// shrinkFile rewrites the database into a fresh file and swaps it in.
func shrinkFile(cmd *cobra.Command, path string) error {
	before, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp := path + ".compact"
	_ = os.Remove(tmp) // a leftover of an interrupted shrink
	if err := wal.CompactFile(path, tmp); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("wal compact: replace %s: %w", path, err)
	}
	after, err := os.Stat(path)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "file: %d -> %d bytes\n", before.Size(), after.Size())
	return err
}

type entryView struct {
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	Owner  string    `json:"owner"`
	Type   string    `json:"type"`
	Intent bool      `json:"intent,omitempty"`
	Bytes  int       `json:"bytes"`
}

func inspectWAL(cmd *cobra.Command, g *globals, log *wal.Log, from uint64, limit int) error {
	st, err := log.Stats()
	if err != nil {
		return err
	}
	var entries []entryView
	stop := fmt.Errorf("limit")
	err = log.Replay(from, func(e wal.Entry) error {
		if limit > 0 && len(entries) >= limit {
			return stop
		}
		entries = append(entries, entryView{Seq: e.Seq, Time: e.Time, Owner: e.Owner, Type: e.Type, Intent: e.Intent, Bytes: len(e.Payload)})
		return nil
	})
	if err != nil && !isStop(err, stop) {
		return err
	}
	w := cmd.OutOrStdout()
	if g.json {
		return writeJSON(w, map[string]any{"stats": st, "entries": entries})
	}
	fmt.Fprintf(w, "%d entries, %d bytes, last seq %d, %d open intents\n", st.Entries, st.Bytes, st.LastSeq, st.Uncommitted)
	for _, e := range entries {
		mark := ""
		if e.Intent {
			mark = " intent"
		}
		if _, err := fmt.Fprintf(w, "%8d  %s  %-16s %-24s %6dB%s\n", e.Seq, e.Time.Format(time.RFC3339Nano), e.Owner, e.Type, e.Bytes, mark); err != nil {
			return err
		}
	}
	return nil
}

func isStop(err, stop error) bool {
	for e := err; e != nil; {
		if e == stop {
			return true
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		e = u.Unwrap()
	}
	return false
}
