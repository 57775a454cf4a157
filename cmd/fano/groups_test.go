package main

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every command that only groups others (fano itself, seed, wal, config,
// ...) refuses a stray argument with the usage and a non-zero exit, and
// alone prints its help and exits 0. The tree is walked, so a group added
// later is held to it too.
func TestGroupCommandsRefuseStrayArguments(t *testing.T) {
	var groups [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		if c.HasSubCommands() {
			groups = append(groups, path)
		}
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	walk(newRoot(os.Stdout, os.Stderr), nil)
	require.GreaterOrEqual(t, len(groups), 5, "fano, seed, wal, config, ... have subcommands: %v", groups)

	for _, path := range groups {
		name := strings.Join(append([]string{"fano"}, path...), " ")
		code, out, errOut := cli(append(append([]string(nil), path...), "stray-argument")...)
		assert.Equal(t, exitUsage, code, "%s stray-argument: exit status", name)
		assert.Empty(t, out, name)
		assert.Contains(t, errOut, `fano: unknown command "stray-argument" for "`+name+`"`, name)
		assert.Contains(t, errOut, "Usage:\n  "+name, "%s: the usage follows", name)

		code, out, errOut = cli(path...)
		assert.Equal(t, 0, code, "%s alone: its help, %s", name, errOut)
		assert.Contains(t, out, "Available Commands:", name)
	}

	// What a person who typed `fano seed "question"` meant.
	code, _, errOut := cli("seed", "Which planes of order 10 exist?")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `to add it: fano seed add "Which planes of order 10 exist?"`)
	code, _, errOut = cli("wal", "inspec")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "did you mean fano wal inspect?")
}

// A flag that does not parse is a usage error like an unknown command:
// the message naming the flag, the command's usage, exit status 2, and
// nothing on standard output.
func TestBadFlagIsAUsageError(t *testing.T) {
	for _, args := range [][]string{{"tasks", "--bogus"}, {"tasks", "--limit", "many"}, {"wal", "inspect", "--from", "x"}} {
		code, out, errOut := cli(args...)
		assert.Equal(t, exitUsage, code, "%v", args)
		assert.Empty(t, out, "%v", args)
		assert.Contains(t, errOut, args[len(args)-1], "%v: the message names the flag or value", args)
		assert.Contains(t, errOut, "Usage:\n  fano "+args[0], "%v: the usage follows", args)
	}
}
