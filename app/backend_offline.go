package app

import (
	"context"

	"fano/config"
	"fano/gateway"
)

// OfflineBackend stands in for a config backend in a command that reads
// the data directory without running fano (status and tasks offline,
// verify, repair, recover): such a command needs the backends' names and
// limits, never the backends themselves. It starts nothing (no browser,
// no profile directory, no connection) and refuses every request.
// Set it as Wiring.NewBackend.
func OfflineBackend(name string, _ *config.Backend) (gateway.Backend, error) {
	return offlineBackend(name), nil
}

type offlineBackend string

func (b offlineBackend) Name() string { return string(b) }

func (b offlineBackend) Send(context.Context, gateway.Request) (gateway.Response, error) {
	return gateway.Response{}, b.Health(context.Background())
}

func (b offlineBackend) Health(context.Context) error {
	return gateway.Unavailable(string(b), "not started: this command only reads the data directory")
}

func (offlineBackend) Close() error { return nil }
