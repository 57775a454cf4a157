package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"fano/modules/clean"
	"fano/modules/dedup"
	"fano/modules/documenter"
)

// `fano doc`: the document as a reader meets it. `doc check` reads the
// output files (output/document.json and DOCUMENT.md) and needs no lock,
// so it runs beside a live fano.

func newDocCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "doc", Short: "Check or export the document"}
	cmd.AddCommand(newDocCheckCmd(g), newDocExportCmd(g))
	return cmd
}

// docCheckReport is the JSON of `fano doc check --json`.
type docCheckReport struct {
	Document string               `json:"document"`
	Sections int                  `json:"sections"`
	Counts   map[string]int       `json:"counts"`
	Findings []documenter.Finding `json:"findings"`
	Clean    bool                 `json:"clean"`
}

// errDocFindings makes `doc check` exit non-zero after printing its findings.
var errDocFindings = errors.New("the document has findings")

func newDocCheckCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Report repeated sentences and titles, chat filler, broken anchors and empty sections (exit 1 if any)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep, err := docCheck(g)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if g.json {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(w, "doc check %s: %d sections, %d findings\n", rep.Document, rep.Sections, len(rep.Findings))
				for _, k := range documenter.FindingKinds {
					fmt.Fprintf(w, "  %-18s %d\n", k, rep.Counts[k])
				}
				for _, f := range rep.Findings {
					fmt.Fprintf(w, "  %s %s: %s\n", f.Kind, f.Section, f.Detail)
				}
			}
			if !rep.Clean {
				return fmt.Errorf("%w (%d)", errDocFindings, len(rep.Findings))
			}
			return nil
		},
	}
	jsonFlag(cmd, g)
	return cmd
}

// readDocument reads output/document.json (and DOCUMENT.md when present)
// of the configured data directory.
func readDocument(g *globals) (documenter.DocumentFile, string, string, error) {
	cfg, err := loadConfig(g)
	if err != nil {
		return documenter.DocumentFile{}, "", "", err
	}
	path := filepath.Join(cfg.DataDir, "output", documenter.DocumentJSON)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return documenter.DocumentFile{}, "", path, fmt.Errorf("no document at %s: the documenter has not written a section yet", path)
	}
	if err != nil {
		return documenter.DocumentFile{}, "", path, err
	}
	var doc documenter.DocumentFile
	if err := json.Unmarshal(data, &doc); err != nil {
		return documenter.DocumentFile{}, "", path, fmt.Errorf("%s: %w", path, err)
	}
	md, err := os.ReadFile(filepath.Join(cfg.DataDir, "output", documenter.DocumentMD))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return documenter.DocumentFile{}, "", path, err
	}
	return doc, string(md), path, nil
}

func docCheck(g *globals) (*docCheckReport, error) {
	cfg, err := loadConfig(g)
	if err != nil {
		return nil, err
	}
	doc, md, path, err := readDocument(g)
	if err != nil {
		return nil, err
	}
	cl, err := clean.Load(cfg.Documenter.PromptsDir)
	if err != nil {
		return nil, err
	}
	dc := dedup.Config{Threshold: cfg.Deduplication.SimilarityThreshold}
	findings := documenter.CheckDocument(doc, md, cl, dc)
	rep := &docCheckReport{Document: path, Sections: len(doc.Sections), Counts: map[string]int{}, Findings: findings, Clean: len(findings) == 0}
	if rep.Findings == nil {
		rep.Findings = []documenter.Finding{}
	}
	for _, k := range documenter.FindingKinds {
		rep.Counts[k] = 0
	}
	for _, f := range findings {
		rep.Counts[f.Kind]++
	}
	return rep, nil
}
