// Package logging sets up fano's zerolog logger — readable lines on a
// terminal, JSON in <data-dir>/logs/fano.log — and bridges log/slog (which
// protoactor-go logs through) into it. Event names are
// {component}.{module}.{action}, in the "event" field, so a log can be
// filtered by name.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

// Options chooses where logs go.
type Options struct {
	Dir     string    // <data-dir>/logs; "" = no file
	Level   string    // debug | info | warn | error
	Console string    // auto | pretty | json | off
	Out     io.Writer // console stream; nil = os.Stderr
}

// New returns the logger and a close function for its file.
func New(o Options) (zerolog.Logger, func() error, error) {
	level, err := zerolog.ParseLevel(o.Level)
	if err != nil || o.Level == "" {
		level = zerolog.InfoLevel
	}
	out := o.Out
	if out == nil {
		out = os.Stderr
	}
	var writers []io.Writer
	switch o.Console {
	case "off":
	case "json":
		writers = append(writers, out)
	case "pretty":
		writers = append(writers, zerolog.ConsoleWriter{Out: out, TimeFormat: time.TimeOnly})
	default:
		if f, ok := out.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			writers = append(writers, zerolog.ConsoleWriter{Out: out, TimeFormat: time.TimeOnly})
		} else {
			writers = append(writers, zerolog.ConsoleWriter{Out: out, TimeFormat: time.TimeOnly, NoColor: true})
		}
	}
	closeFn := func() error { return nil }
	if o.Dir != "" {
		if err := os.MkdirAll(o.Dir, 0o700); err != nil {
			return zerolog.Nop(), closeFn, fmt.Errorf("logs: create %s: %w", o.Dir, err)
		}
		path := filepath.Join(o.Dir, "fano.log")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return zerolog.Nop(), closeFn, fmt.Errorf("logs: open %s: %w", path, err)
		}
		writers = append(writers, f)
		closeFn = f.Close
	}
	var w io.Writer = io.Discard
	if len(writers) > 0 {
		w = zerolog.MultiLevelWriter(writers...)
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger(), closeFn, nil
}

// Slog returns a slog logger that writes through l, for protoactor-go.
// The actor system's own chatter goes in at debug, warnings and errors at
// their level.
func Slog(l zerolog.Logger) *slog.Logger {
	return slog.New(&slogHandler{l: l.With().Str("component", "protoactor").Logger()})
}

// slogHandler is a slog.Handler that writes to zerolog.
type slogHandler struct {
	l     zerolog.Logger
	attrs []slog.Attr
	group string
}

func (h *slogHandler) Enabled(_ context.Context, lv slog.Level) bool {
	return h.l.GetLevel() <= zlevel(lv)
}

func (h *slogHandler) Handle(_ context.Context, r slog.Record) error {
	ev := h.l.WithLevel(zlevel(r.Level))
	if ev == nil {
		return nil
	}
	add := func(a slog.Attr) bool {
		key := a.Key
		if h.group != "" {
			key = h.group + "." + key
		}
		ev = ev.Interface(key, a.Value.Resolve().Any())
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	ev.Msg(r.Message)
	return nil
}

func (h *slogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append(append([]slog.Attr{}, h.attrs...), attrs...)
	return &n
}

func (h *slogHandler) WithGroup(name string) slog.Handler {
	n := *h
	if n.group != "" {
		name = n.group + "." + name
	}
	n.group = name
	return &n
}

// zlevel maps slog levels onto zerolog's; protoactor's info chatter
// (actor started, dead letters) is debug for us.
func zlevel(lv slog.Level) zerolog.Level {
	switch {
	case lv >= slog.LevelError:
		return zerolog.ErrorLevel
	case lv >= slog.LevelWarn:
		return zerolog.WarnLevel
	default:
		return zerolog.DebugLevel
	}
}
