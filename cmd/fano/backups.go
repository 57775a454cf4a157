package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	fanoapp "fano/app"
	"fano/wal"
)

// newWALBackupCmds are `fano wal backup`, `fano wal restore FILE` and
// `fano wal salvage --to FILE`.
func newWALBackupCmds(g *globals) []*cobra.Command {
	backup := &cobra.Command{
		Use:   "backup",
		Short: "Write a consistent copy of the WAL into <data-dir>/backup/ now (fano must be stopped; a running fano backs up on its own schedule)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := openAppReadOnly(g)
			if errors.Is(err, wal.ErrLocked) {
				// fano runs: it takes the backup itself, online.
				return backupThroughPanel(cmd, g, err)
			}
			if err != nil {
				return err
			}
			defer a.close()
			path, err := fanoapp.TakeBackup(a.log, a.dataDir, time.Now(), a.cfg.Orchestrator.State.BackupsKept)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backup written: %s (last seq %d)\n", path, a.log.LastSeq())
			return nil
		},
	}
	restore := &cobra.Command{
		Use:   "restore FILE",
		Short: "Put a backup in place of the data directory's fano.db (fano must be stopped; the old file is kept beside it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(g)
			if err != nil {
				return err
			}
			target := filepath.Join(cfg.DataDir, "fano.db")
			aside, err := wal.Restore(args[0], target)
			if err != nil {
				return err
			}
			last, _ := wal.CheckBackup(target)
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "restored %s from %s (last seq %d)\n", target, args[0], last)
			if aside != "" {
				fmt.Fprintf(w, "the previous file is kept as %s\n", aside)
			}
			fmt.Fprintln(w, "work recorded after the backup was taken is not in it: fano redoes what it finds unfinished")
			return nil
		},
	}
	var to string
	salvage := &cobra.Command{
		Use:   "salvage --to FILE",
		Short: "Copy every readable entry and checkpoint of a damaged fano.db into a new file FILE and report what was lost",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return errors.New("wal salvage: --to FILE is required (a new file; fano.db is never written)")
			}
			cfg, err := loadConfig(g)
			if err != nil {
				return err
			}
			src := filepath.Join(cfg.DataDir, "fano.db")
			rep, err := wal.Salvage(src, to)
			if err != nil {
				return err
			}
			printSalvage(cmd, src, to, rep)
			return nil
		},
	}
	salvage.Flags().StringVar(&to, "to", "", "the new file to write (must not exist)")
	return []*cobra.Command{backup, restore, salvage}
}

func printSalvage(cmd *cobra.Command, src, dst string, r wal.SalvageReport) {
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "salvaged %s into %s\n", src, dst)
	fmt.Fprintf(w, "  entries copied:   %d in %d blocks (first seq %d, last seq %d)\n", r.Entries, r.Blocks, r.FirstCopied, r.LastSeq)
	fmt.Fprintf(w, "  open intents:     %d\n", r.Intents)
	fmt.Fprintf(w, "  checkpoints:      %s\n", orNone(r.Checkpoints))
	fmt.Fprintf(w, "  archive records:  %d\n", r.Archived)
	if r.SourceIntact {
		fmt.Fprintln(w, "  nothing was lost")
		return
	}
	for _, x := range r.Lost {
		fmt.Fprintf(w, "  LOST entries %d-%d (newer than every checkpoint)\n", x.From, x.To)
	}
	for _, x := range r.Unaccounted {
		fmt.Fprintf(w, "  missing entries %d-%d: compacted earlier (covered by a checkpoint) or lost\n", x.From, x.To)
	}
	if !r.LastSeqKnown {
		fmt.Fprintf(w, "  the end of the log could not be reached: entries after seq %d may be lost\n", r.LastSeq)
	}
	for _, o := range r.LostOwners {
		fmt.Fprintf(w, "  LOST checkpoint of %s (its state is rebuilt from the entries copied)\n", o)
	}
	if r.LostArchive {
		fmt.Fprintln(w, "  some archived (finished) tasks could not be read")
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "  problem: %s\n", p)
	}
	fmt.Fprintf(w, "next: stop fano, move %s to %s, then 'fano verify'\n", dst, src)
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

// backupThroughPanel asks the running fano (which holds the WAL) for a
// backup through its control panel.
func backupThroughPanel(cmd *cobra.Command, g *globals, locked error) error {
	p, err := livePanel(cmd.Context(), g, "wal backup")
	var down *notRunningError
	if errors.As(err, &down) {
		return fmt.Errorf("wal backup: %w, and its control panel does not answer at %s; it backs up every orchestrator.state.backup_interval_hours on its own", locked, down.panel.addr)
	}
	if err != nil {
		return err
	}
	r, err := p.client.Backup(cmd.Context())
	if err != nil {
		return apiErr("wal backup", err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "backup written by the running fano: %s\n", r.Path)
	return nil
}
