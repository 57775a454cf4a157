package app

import (
	"fmt"
	"path/filepath"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"fano/config"
	"fano/remote"
)

// HostsStatusFile is where a running orchestrator leaves its gateway
// hosts' status for `fano status`.
const HostsStatusFile = "hosts-status.json"

// startHub listens for the config's gateway hosts (nil when it has none):
// mTLS with the certificate of `fano remote init`, or plaintext on
// loopback when the config asks for it.
func startHub(cfg *config.Config, dataDir string, logger zerolog.Logger, clock clockwork.Clock) (*remote.Hub, error) {
	if len(cfg.Hosts) == 0 {
		return nil, nil
	}
	r := cfg.Remote
	t := remote.Transport{Listen: r.Listen, Advertise: r.Advertise, Plaintext: r.PlaintextLoopback}
	if !t.Plaintext {
		id, err := remote.OrchestratorIdentity(dataDir)
		if err != nil {
			return nil, err
		}
		t.Identity = id
	}
	ledger, err := remote.Ledger(dataDir)
	if err != nil {
		return nil, err
	}
	hub, err := remote.StartHub(remote.HubConfig{Transport: t, Version: remote.Version(), Routed: cfg.RemoteBackends(),
		Ledger: ledger, Clock: clock, Logger: logger, StatusFile: filepath.Join(dataDir, HostsStatusFile)})
	if err != nil {
		return nil, fmt.Errorf("remote.listen %s: %w", r.Listen, err)
	}
	return hub, nil
}
