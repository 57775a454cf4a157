package wal

// Syncs reports whether the log's writes wait for the disk (false with
// Options.NoSync): what goes beside it (a status file) need not be
// durable either when it does not.
func (l *Log) Syncs() bool { return !l.opts.NoSync }
