package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// A run directory keeps the definition its run used (SnapshotFile) and
// where it came from (OriginFile): the file's own path, for its relative
// item paths, and the fano config the run was started with. With both,
// the run directory alone is enough to rebuild the module and its config
// (fano recover, verify, status on --data-dir).
const (
	SnapshotFile = "pipeline.yaml"
	OriginFile   = "pipeline-origin.json"
)

// Origin is where a run directory's definition came from.
type Origin struct {
	// File is the pipeline file's absolute path when the run started.
	File string `json:"file"`
	// Config is the absolute path of the fano config given with --config
	// ("": the definition's own config: field, or the built-in one).
	Config string `json:"config,omitempty"`
}

// ErrNoRun: the directory holds no pipeline definition.
var ErrNoRun = errors.New("not a pipeline run directory")

// IsRunDir reports whether dir holds a pipeline run's definition.
func IsRunDir(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, SnapshotFile))
	return err == nil
}

// SaveRun writes def and its origin into the run directory, each file
// whole (a temporary file, synced, renamed into place).
func SaveRun(dir string, def *Definition, configPath string) error {
	o := Origin{File: def.File}
	if abs, err := filepath.Abs(def.File); err == nil {
		o.File = abs
	}
	if configPath != "" {
		abs, err := filepath.Abs(configPath)
		if err != nil {
			return fmt.Errorf("pipeline %s: config %s: %w", def.Name, configPath, err)
		}
		o.Config = abs
	}
	b, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return err
	}
	if err := writeWhole(filepath.Join(dir, SnapshotFile), def.Source); err != nil {
		return err
	}
	return writeWhole(filepath.Join(dir, OriginFile), append(b, '\n'))
}

// LoadRun reads the definition a run directory keeps. Relative item
// paths start where the original file was; a run directory written
// before origins were kept reads them from the run directory.
func LoadRun(dir string) (*Definition, Origin, error) {
	path := filepath.Join(dir, SnapshotFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, Origin{}, fmt.Errorf("%s: %w (no %s)", dir, ErrNoRun, SnapshotFile)
	}
	if err != nil {
		return nil, Origin{}, fmt.Errorf("reading pipeline %s: %w", path, err)
	}
	var o Origin
	if b, err := os.ReadFile(filepath.Join(dir, OriginFile)); err == nil {
		if err := json.Unmarshal(b, &o); err != nil {
			return nil, Origin{}, fmt.Errorf("%s: %w", filepath.Join(dir, OriginFile), err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, Origin{}, err
	}
	file := path
	if o.File != "" {
		file = o.File
	}
	def, err := Parse(data, file)
	if err != nil {
		return nil, o, fmt.Errorf("%s (the copy of %s): %w", path, file, err)
	}
	return def, o, nil
}

func writeWhole(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
