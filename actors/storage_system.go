package actors

import (
	"fmt"
	"time"

	"fano/pb"
)

// onStorage turns a WAL write fault into the system's reaction: new work
// stops, running tasks pause in memory (storageGate), an alert
// goes to the panel, and a log line at most once a minute; when writes go
// through again work resumes by itself. Runs in the WAL writer's
// goroutine: it only flips a flag, logs and sends.
func (s *System) onStorage(c StorageChange) {
	switch {
	case c.Ended:
		s.storageHalted.Store(false)
		s.storageGate.reopen()
		s.logger.Info().Str("event", "actors.storage.recovered").Dur("down", c.Down).Int("attempts", c.Attempts).
			Msg("WAL writes succeed again: work resumes")
		s.Publish(&pb.StateUpdate{Component: "health", UpdateType: "alert", Data: map[string]string{
			"kind": "storage", "resolved": "true",
			"message": fmt.Sprintf("WAL writes succeed again after %s: work resumes", c.Down.Round(time.Second))}})
		s.tick()
	case c.Began:
		s.storageHalted.Store(true)
		s.storageGate.shut(c.Err, c.Since)
		s.logger.Error().Err(c.Err).Str("event", "actors.storage.write_failed").Int64("paused", s.executors.Load()).
			Msg("WAL writes fail: no new work starts, running tasks are paused in memory; retrying on a backoff")
		s.Publish(&pb.StateUpdate{Component: "health", UpdateType: "alert", Data: map[string]string{
			"kind": "storage", "resolved": "false",
			"message": fmt.Sprintf("WAL writes fail (%v): no new work starts and running tasks are paused; fano retries and resumes by itself when the disk accepts writes", c.Err)}})
	case c.Log:
		s.logger.Error().Err(c.Err).Str("event", "actors.storage.still_failing").Time("since", c.Since).Int("attempts", c.Attempts).
			Msg("WAL writes still fail; retrying")
	}
}

// StorageFault returns the WAL write fault going on (nil if none) and
// since when.
func (s *System) StorageFault() (since time.Time, err error) {
	since, _, err = s.opts.Storage.Fault()
	return since, err
}
