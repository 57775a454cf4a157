package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	fanoapp "fano/app"
	"fano/modules/explorer"
	"fano/pb"
	"fano/wal"
)

// The offline path of `fano seed add` (the command itself, and its online
// path through the control panel, live in panel_cmds.go).

// openExplorer opens the data directory without starting anything and
// rebuilds the explorer's state from its checkpoint and WAL entries.
func openExplorer(g *globals) (*app, *explorer.Module, error) {
	a, err := openApp(g, "off")
	if err != nil {
		if errors.Is(err, wal.ErrLocked) {
			return nil, nil, fmt.Errorf("%w: fano is running on this data directory but its control panel did not answer; try again, or stop it first", err)
		}
		return nil, nil, err
	}
	m, err := fanoapp.NewExplorer(a.cfg, a.logger)
	if err != nil {
		_ = a.close()
		return nil, nil, err
	}
	if err := fanoapp.RecoverOffline(a.log, m); err != nil {
		_ = a.close()
		return nil, nil, err
	}
	return a, m, nil
}

// seedAddOffline has the explorer decide the add-seed events and appends
// them to the WAL as the module host would (owner module/explorer, a
// ModuleEvent in a pb.Event); the next `fano run` applies them. A fano
// that started meanwhile holds the database: that is one clear error.
func seedAddOffline(g *globals, text string, priority int) error {
	a, m, err := openExplorer(g)
	if err != nil {
		return err
	}
	defer a.close()
	now := time.Now()
	evs, err := m.DecideAddSeed(text, priority, now)
	if err != nil {
		return err
	}
	entries := make([]wal.Entry, len(evs))
	for i, me := range evs {
		me.Module = explorer.Name
		payload, err := proto.Marshal(&pb.Event{At: now.UnixNano(), Body: &pb.Event_ModuleEvent{ModuleEvent: me}})
		if err != nil {
			return fmt.Errorf("seed add: encode: %w", err)
		}
		entries[i] = wal.Entry{Time: now, Type: "module_event", Owner: "module/" + explorer.Name, Payload: payload}
	}
	if _, err := a.log.Append(context.Background(), entries...); err != nil {
		return fmt.Errorf("seed add: %w", err)
	}
	for _, me := range evs {
		if err := m.Apply(me, now); err != nil {
			return err
		}
	}
	for _, s := range m.Seeds() {
		if s.Text == strings.TrimSpace(text) {
			if g.json {
				return writeJSON(os.Stdout, s)
			}
			_, err = fmt.Fprintf(os.Stdout, "seed %s added (priority %d); the next `fano run` explores it when a thread is free\n", s.ID, s.Priority)
			return err
		}
	}
	return nil
}
