package actors

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"fano/modules"
	"fano/pb"
	"fano/wal"
)

// ownerEffects owns the intents of output-file writes. It holds no state:
// its entries are side effects to redo, not events to apply.
const ownerEffects = "effects"

// exportsOf lists the files that applying events changed, for a module
// that has output files.
func exportsOf(m modules.Module, events []*pb.Event) []string {
	ex, ok := m.(modules.Exporter)
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	var paths []string
	for _, e := range events {
		me := e.GetModuleEvent()
		if me == nil {
			continue
		}
		for _, p := range ex.Exports(me) {
			if !seen[p] {
				seen[p] = true
				paths = append(paths, p)
			}
		}
	}
	sort.Strings(paths)
	return paths
}

// writeExports rewrites a module's output files under a WAL intent and
// commit: the intent is durable before the file changes, the
// commit after it is durable, so recovery can redo what a crash cut off.
func (rc *recovery) writeExports(m modules.Module, paths []string) error {
	ex, ok := m.(modules.Exporter)
	if !ok || len(paths) == 0 || rc.opts.OutputDir == "" {
		return nil
	}
	entries := make([]wal.Entry, len(paths))
	for i, p := range paths {
		entries[i] = wal.Entry{Time: rc.clock.Now(), Owner: ownerEffects, Type: "file_write", Intent: true,
			Payload: []byte(m.Name() + "\x00" + p)}
	}
	seqs, err := rc.log.Append(context.Background(), entries...)
	if err != nil {
		return fmt.Errorf("%s: log file intents: %w", m.Name(), err)
	}
	for _, p := range paths {
		if err := rc.writeOne(ex, m.Name(), p); err != nil {
			return err // the intent stays open: recovery writes the file
		}
	}
	if err := rc.log.Commit(context.Background(), seqs...); err != nil {
		return fmt.Errorf("%s: commit file writes: %w", m.Name(), err)
	}
	return nil
}

func (rc *recovery) writeOne(ex modules.Exporter, module, path string) error {
	full, err := outputPath(rc.opts.OutputDir, path)
	if err != nil {
		return fmt.Errorf("%s: %w", module, err)
	}
	if sx, ok := ex.(modules.StreamExporter); ok {
		var renderErr error
		err := WriteFileAtomicFrom(full, 0o644, func(w io.Writer) error {
			renderErr = sx.ExportTo(path, w)
			return renderErr
		})
		switch {
		case renderErr != nil:
			return fmt.Errorf("%s: render %s: %w", module, path, renderErr)
		case err != nil:
			return fmt.Errorf("%s: %w", module, err)
		}
		return nil
	}
	data, err := ex.Export(path)
	if err != nil {
		return fmt.Errorf("%s: render %s: %w", module, path, err)
	}
	if err := WriteFileAtomic(full, data, 0o644); err != nil {
		return fmt.Errorf("%s: %w", module, err)
	}
	return nil
}

// outputPath joins a module's relative path to the output directory and
// refuses paths that would leave it.
func outputPath(dir, rel string) (string, error) {
	clean := filepath.Clean(rel)
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("output path %q leaves the output directory", rel)
	}
	return filepath.Join(dir, clean), nil
}

// redoEffects writes again every output file whose intent has no commit,
// from the recovered state, then commits those intents.
func (rc *recovery) redoEffects(open []wal.Entry, rep *RecoveryReport) error {
	byName := map[string]modules.Module{}
	for _, m := range rc.opts.Modules {
		byName[m.Name()] = m
	}
	var done []uint64
	for _, ent := range open {
		if ent.Owner != ownerEffects {
			continue
		}
		module, path, ok := bytes.Cut(ent.Payload, []byte{0})
		m := byName[string(module)]
		ex, isEx := m.(modules.Exporter)
		if !ok || m == nil || !isEx {
			rep.Problems = append(rep.Problems, fmt.Sprintf("file intent %d names an unknown module or path: %q", ent.Seq, ent.Payload))
			continue
		}
		if rc.opts.Dry {
			rep.Repairs = append(rep.Repairs, fmt.Sprintf("would rewrite output/%s (intent %d)", path, ent.Seq))
			continue
		}
		if err := rc.writeOne(ex, m.Name(), string(path)); err != nil {
			return fmt.Errorf("recover: redo file intent %d: %w", ent.Seq, err)
		}
		done = append(done, ent.Seq)
		rep.Repairs = append(rep.Repairs, fmt.Sprintf("rewrote output/%s (intent %d had no commit)", path, ent.Seq))
	}
	if len(done) > 0 {
		if err := rc.log.Commit(context.Background(), done...); err != nil {
			return fmt.Errorf("recover: commit redone file intents: %w", err)
		}
	}
	return nil
}

// WriteFileAtomic writes data to path so that a crash leaves either the old
// file or the new one: a temp file in the same directory, fsync, rename,
// then fsync of the directory.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return WriteFileAtomicFrom(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFileAtomicFrom is WriteFileAtomic with the content written by
// write, through a buffer, instead of held whole in memory (a results
// file of a million items is a hundred megabytes).
func WriteFileAtomicFrom(path string, perm os.FileMode, write func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<16)
	if err = write(bw); err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, perm)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write %s: sync dir: %w", path, err)
	}
	defer d.Close()
	if err = d.Sync(); err != nil {
		return fmt.Errorf("write %s: sync dir: %w", path, err)
	}
	return nil
}
