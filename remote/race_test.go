//go:build race

package remote

// Under the race detector, the tests that start two protoactor-go
// remotes in one process are left out: Remote.Start sets gRPC's
// process-wide logger (grpclog.SetLoggerV2) every time, and the race
// detector sees that write against the reads of the other remote's gRPC
// goroutines. fano runs one remote a process (the hub, or a host); the
// two-process test runs under -race.
