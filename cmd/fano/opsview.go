package main

import (
	"io"
	"time"

	fanoapp "fano/app"
	"fano/wal"
)

// What `fano status` shows of a run's health and metrics (fanoapp's, under
// the names the status command uses).

type opsSection = fanoapp.OpsSection

func readOpsStatus(dataDir string, log *wal.Log, now time.Time) (*opsSection, error) {
	return fanoapp.ReadOpsStatus(dataDir, log, now)
}

func printOps(w io.Writer, s *opsSection) { fanoapp.PrintOps(w, s) }

func liveOpsSection(h any) *opsSection { return fanoapp.LiveOpsSection(h) }

func printLiveHealth(w io.Writer, h any) { fanoapp.PrintLiveHealth(w, h) }
