package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// docFiles are the pages a person reads: README.md and docs/*.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	return append([]string{"../../README.md"}, files...)
}

// docCommand is one command line shown in a code block of a page.
type docCommand struct {
	file string
	line int
	text string
}

// docCommands returns the lines of the pages' fenced code blocks that run
// fano: they start with `fano `, `./bin/fano ` or `bin/fano ` (after an
// optional `$ ` prompt).
func docCommands(t *testing.T) []docCommand {
	t.Helper()
	var out []docCommand
	for _, f := range docFiles(t) {
		text, err := os.ReadFile(f)
		require.NoError(t, err)
		inBlock := false
		for i, line := range strings.Split(string(text), "\n") {
			trimmed := strings.TrimSpace(line)
			if strings.HasPrefix(trimmed, "```") {
				inBlock = !inBlock
				continue
			}
			if !inBlock {
				continue
			}
			trimmed = strings.TrimPrefix(trimmed, "$ ")
			for _, prefix := range []string{"./bin/fano ", "bin/fano ", "fano "} {
				if strings.HasPrefix(trimmed, prefix) {
					out = append(out, docCommand{file: strings.TrimPrefix(f, "../../"), line: i + 1, text: "fano " + strings.TrimPrefix(trimmed, prefix)})
					break
				}
			}
		}
	}
	return out
}

// shellWords splits a command line as a shell would (quotes kept
// together), up to a comment.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	quote := rune(0)
	inWord := false
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == '#' && !inWord:
			return words
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// checkDocCommand resolves words (without the leading "fano") against the
// command tree: every word before the first argument names a subcommand
// (`a|b`: each does), every flag (`--name`, `--name=v`, `-x`, in brackets
// or not, `--a|--b`) exists on the command reached.
func checkDocCommand(root *cobra.Command, words []string) error {
	c := root
	args := false
	for _, w := range words {
		w = strings.Trim(w, "[](),")
		if w == "" || w == "..." {
			continue
		}
		if strings.HasPrefix(w, "-") {
			for _, alt := range strings.Split(w, "|") {
				name, _, _ := strings.Cut(alt, "=")
				var f bool
				switch {
				case name == "-h" || name == "--help":
					f = true // cobra adds it to every command when it runs
				case strings.HasPrefix(name, "--"):
					f = c.Flag(strings.TrimPrefix(name, "--")) != nil
				case len(name) == 2:
					f = c.Flags().ShorthandLookup(name[1:]) != nil || c.InheritedFlags().ShorthandLookup(name[1:]) != nil
				}
				if !f {
					return fmt.Errorf("%s has no flag %s", c.CommandPath(), name)
				}
			}
			continue
		}
		if args || !c.HasSubCommands() {
			args = true // an argument: placeholders and values are not checked
			continue
		}
		var next *cobra.Command
		for _, alt := range strings.Split(w, "|") {
			sub, rest, err := c.Find([]string{alt})
			if err != nil || sub == c || len(rest) > 0 {
				return fmt.Errorf("%s has no command %q", c.CommandPath(), alt)
			}
			next = sub
		}
		c = next
	}
	return nil
}

// Every fano command line shown in README.md and docs/*.md names real
// commands and flags: the pages are checked against the command tree, so
// a renamed flag or a command that was never written turns this red.
func TestDocCommandsAreRealCommands(t *testing.T) {
	cmds := docCommands(t)
	require.Greater(t, len(cmds), 30, "the pages show fano's commands in code blocks")
	root := newRoot(os.Stdout, os.Stderr)
	for _, dc := range cmds {
		words := shellWords(dc.text)
		require.Equal(t, "fano", words[0])
		if err := checkDocCommand(root, words[1:]); err != nil {
			t.Errorf("%s:%d: %s: %v", dc.file, dc.line, dc.text, err)
		}
	}
}

// The checker itself: what it accepts and what it refuses.
func TestCheckDocCommand(t *testing.T) {
	root := newRoot(os.Stdout, os.Stderr)
	for _, ok := range []string{
		`fano run [--config fano.yaml] [--data-dir DIR] [--until-idle]`,
		`fano tasks [--module M] [--state S] [--limit N] [task-id]`,
		`fano seed add "Which planes? # not a comment" --priority=3`,
		`fano backend pause|resume <name>`,
		`fano wal compact [--shrink]          # --bogus in a comment`,
		`fano status -h`,
	} {
		require.NoError(t, checkDocCommand(root, shellWords(ok)[1:]), ok)
	}
	for bad, why := range map[string]string{
		`fano runn --until-idle`:         `fano has no command "runn"`,
		`fano run --until-idel`:          "fano run has no flag --until-idel",
		`fano wal inspect [--form N]`:    "fano wal inspect has no flag --form",
		`fano backend pause|rewind name`: `fano backend has no command "rewind"`,
		`fano seed "question"`:           `fano seed has no command "question"`,
		`fano tasks -z`:                  "fano tasks has no flag -z",
	} {
		err := checkDocCommand(root, shellWords(bad)[1:])
		require.Error(t, err, bad)
		require.Equal(t, why, err.Error(), bad)
	}
}

// The README is read in five minutes, and the pages speak of fano, not of
// how it was written: no session or round numbers, no commit ids.
func TestPagesSpeakOfFano(t *testing.T) {
	text, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	require.LessOrEqual(t, strings.Count(string(text), "\n"), 200, "README.md: at most 200 lines; the rest goes to docs/")
	history := regexp.MustCompile(`(?i)\bsessions? \d|\brounds? \d|\bround \w+ of\b|\bcommit [0-9a-f]{7,40}\b|\b[0-9a-f]{7}[0-9a-f]*\b \(|\bissue #?\d`)
	for _, f := range docFiles(t) {
		text, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, line := range strings.Split(string(text), "\n") {
			if m := history.FindString(line); m != "" {
				t.Errorf("%s:%d: %q tells the history of the code: %s", strings.TrimPrefix(f, "../../"), i+1, m, line)
			}
		}
	}
}
