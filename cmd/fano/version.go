package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
)

// versionInfo is `fano version`: which code this binary is, read from the
// build info the Go toolchain embeds.
type versionInfo struct {
	// Version is the module version ("v1.2.3", a pseudo-version, or
	// "(devel)"), or what -ldflags "-X main.version=..." set.
	Version string `json:"version"`
	// Revision, Time and Modified come from the VCS the binary was built
	// in; empty (and false) when it was built without one.
	Revision  string     `json:"revision,omitempty"`
	Time      *time.Time `json:"time,omitempty"`
	Modified  bool       `json:"modified"`
	GoVersion string     `json:"go_version"`
}

// versionOf reads bi (nil: no build info) with ldflagVersion, the value of
// main.version, taking precedence over the module version when set.
func versionOf(bi *debug.BuildInfo, ldflagVersion string) versionInfo {
	v := versionInfo{Version: ldflagVersion}
	if bi == nil {
		if v.Version == "" {
			v.Version = "unknown"
		}
		return v
	}
	v.GoVersion = bi.GoVersion
	if v.Version == "" {
		v.Version = bi.Main.Version
	}
	if v.Version == "" {
		v.Version = "(devel)" // test binaries carry no module version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			if t, err := time.Parse(time.RFC3339, s.Value); err == nil {
				v.Time = &t
			}
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func newVersionCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print fano's version, the commit it was built from and the Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bi, _ := debug.ReadBuildInfo()
			v := versionOf(bi, version)
			if g.json {
				return writeJSON(cmd.OutOrStdout(), v)
			}
			return printVersion(cmd.OutOrStdout(), v)
		},
	}
	jsonFlag(cmd, g)
	return cmd
}

// printVersion prints one line: "fano v1.2.3 (commit 0123abcd…, 2026-11-23
// 20:00 UTC, modified) go1.26.8".
func printVersion(w io.Writer, v versionInfo) error {
	build := ""
	if v.Revision != "" {
		rev := v.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		build = "commit " + rev
		if v.Time != nil {
			build += ", " + v.Time.UTC().Format("2006-01-02 15:04 UTC")
		}
		if v.Modified {
			build += ", with uncommitted changes"
		}
	} else {
		build = "no version control information"
	}
	_, err := fmt.Fprintf(w, "fano %s (%s) %s\n", v.Version, build, v.GoVersion)
	return err
}
