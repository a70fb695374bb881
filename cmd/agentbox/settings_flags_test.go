package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentbox/agentbox/internal/config"
)

// TestFlagsOfSettings: each flag the settings table names (config.Settings'
// Flag) is a flag of some command, and its help there names the setting's
// variable, so the table and the CLI do not drift apart.
func TestFlagsOfSettings(t *testing.T) {
	help := map[string][]string{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) { help[f.Name] = append(help[f.Name], f.Usage) })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
	for _, s := range config.Settings {
		if s.Flag == "" {
			continue
		}
		usages, ok := help[strings.TrimPrefix(s.Flag, "--")]
		if !ok {
			t.Errorf("%s: no command has %s", s.Env, s.Flag)
			continue
		}
		named := false
		for _, u := range usages {
			named = named || strings.Contains(u, s.Env)
		}
		if !named && !flagsNotNaming[s.Flag] {
			t.Errorf("%s: the help of %s never names it: %q", s.Env, s.Flag, usages)
		}
	}
}

// flagsNotNaming are the flags whose help does not name their setting's
// variable: they override it for one command or job and say so otherwise.
var flagsNotNaming = map[string]bool{"--network": true, "--no-auth": true}
