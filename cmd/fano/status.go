package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/spf13/cobra"

	"fano/actors"
	"fano/wal"
)

// statusReport is `fano status` read from the data directory.
type statusReport struct {
	Running  bool                   `json:"running"`
	Message  string                 `json:"message,omitempty"`
	DataDir  string                 `json:"data_dir"`
	WAL      *walStats              `json:"wal,omitempty"`
	Recovery *actors.RecoveryReport `json:"recovery,omitempty"`
	// Ops is health (while fano runs) and the 24-hour metrics.
	Ops *opsSection `json:"ops,omitempty"`
}

type walStats struct {
	Entries          int    `json:"entries"`
	Bytes            int64  `json:"bytes"`
	LastSeq          uint64 `json:"last_seq"`
	Uncommitted      int    `json:"uncommitted"`
	OldestCheckpoint string `json:"oldest_checkpoint,omitempty"`
}

func newStatusCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show tasks and the WAL of the data directory",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if live, err := livePanelStatus(cmd, g); err != nil || live {
				return err
			}
			cfg, err := loadConfig(g)
			if err != nil {
				return err
			}
			rep := statusReport{DataDir: cfg.DataDir}
			a, err := openAppReadOnly(g)
			if errors.Is(err, wal.ErrLocked) {
				rep.Running = true
				rep.Message = err.Error() + "; live status comes from the control panel"
				if rep.Ops, err = readOpsStatus(cfg.DataDir, nil, time.Now()); err != nil {
					return err
				}
				return printStatus(cmd, g, rep)
			}
			if err != nil {
				return err
			}
			defer a.close()
			rep.Message = "fano is not running: read from the data directory"
			st, err := a.log.Stats()
			if err != nil {
				return err
			}
			rep.WAL = &walStats{Entries: st.Entries, Bytes: st.Bytes, LastSeq: st.LastSeq, Uncommitted: st.Uncommitted}
			if st.OldestCheckpoint.Owner != "" {
				rep.WAL.OldestCheckpoint = fmt.Sprintf("%s@%d", st.OldestCheckpoint.Owner, st.OldestCheckpoint.Seq)
			}
			opts, err := a.options(clockwork.NewRealClock())
			if err != nil {
				return err
			}
			opts.Dry = true
			if rep.Recovery, err = actors.Recover(opts); err != nil {
				return err
			}
			if rep.Ops, err = readOpsStatus(a.dataDir, a.log, time.Now()); err != nil {
				return err
			}
			return printStatus(cmd, g, rep)
		},
	}
	jsonFlag(cmd, g)
	return cmd
}

func printStatus(cmd *cobra.Command, g *globals, r statusReport) error {
	w := cmd.OutOrStdout()
	if g.json {
		return writeJSON(w, r)
	}
	fmt.Fprintf(w, "data dir: %s\n%s\n", r.DataDir, r.Message)
	if r.WAL != nil {
		fmt.Fprintf(w, "wal: %d entries, %d bytes, last seq %d, %d open intents, oldest checkpoint %s\n",
			r.WAL.Entries, r.WAL.Bytes, r.WAL.LastSeq, r.WAL.Uncommitted, r.WAL.OldestCheckpoint)
	}
	if r.Recovery != nil {
		fmt.Fprintf(w, "tasks: %d (%v)\n", r.Recovery.TasksRecovered, r.Recovery.TaskStates)
	}
	printOps(w, r.Ops)
	return nil
}
