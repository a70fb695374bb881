package main

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	dockerunits "github.com/docker/go-units"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentbox/agentbox/internal/units"
)

// One way to say each thing: a flag name has one type and one syntax on
// every command that has it (TestFlagsAgreeAcrossCommands checks). The
// values here are checked as the command line is parsed, so a mistake is
// a usage error (exit 2) that names the flag and what it wants, before
// anything runs. Register them with fl.Var:
//
//	fl.Var(sizeVar(&f.Memory), "memory", "sandbox memory, e.g. 512m or 4g")
//	fl.Var(cpusVar(&f.CPUs), "cpus", "sandbox CPUs, e.g. 0.5 or 2")
//	fl.Var(durationVar(&f.Timeout, 10*time.Minute), "timeout", "…")

// sizeValue is a size in bytes as --memory and --disk take it: 512m, 2g,
// 2GiB or a number of bytes. It is kept as typed once checked; the
// command parses it with units.ParseSize.
type sizeValue struct{ p *string }

func sizeVar(p *string) pflag.Value { return sizeValue{p} }

func (v sizeValue) Set(s string) error {
	if _, err := dockerunits.RAMInBytes(s); err != nil {
		return wantErr("want a size such as 512m or 2g")
	}
	*v.p = s
	return nil
}

func (v sizeValue) String() string { return *v.p }
func (v sizeValue) Type() string   { return "size" }

// cpusValue is a number of CPUs as --cpus takes it: 0.5, 1, 2.5. It is
// kept as typed once checked (units.ParseCPUs).
type cpusValue struct{ p *string }

func cpusVar(p *string) pflag.Value { return cpusValue{p} }

func (v cpusValue) Set(s string) error {
	if _, err := units.ParseCPUs(s); err != nil {
		return wantErr("want a positive number of CPUs such as 0.5 or 2")
	}
	*v.p = s
	return nil
}

func (v cpusValue) String() string { return *v.p }
func (v cpusValue) Type() string   { return "cpus" }

// durationValue is a duration with its unit: 30s, 5m, 1h30m. A bare
// number is refused with a hint rather than guessed to be seconds.
type durationValue struct{ p *time.Duration }

// durationVar sets *p to def and returns its flag value.
func durationVar(p *time.Duration, def time.Duration) pflag.Value {
	*p = def
	return durationValue{p}
}

func (v durationValue) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*v.p = d
	return nil
}

func (v durationValue) String() string { return shortDuration(*v.p) }
func (v durationValue) Type() string   { return "duration" }

// parseDuration reads a non-negative duration with a unit.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err == nil && d < 0:
		return 0, wantErr("want a duration that is not negative")
	case err == nil:
		return d, nil
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return 0, wantErr(fmt.Sprintf("give a unit, e.g. %ss or %sm", s, s))
	}
	return 0, wantErr("want a duration such as 30s, 5m or 1h30m")
}

// shortDuration is d as a person writes it: 10m rather than 10m0s, and
// 0 (which the help leaves out as a default).
func shortDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return units.FormatDuration(d)
}

// wantErr is what a flag value of ours says it wants; a usage error shows
// it after the flag and the value as given.
type wantErr string

func (e wantErr) Error() string { return string(e) }

// usageError is a command line that does not say something the command
// can do: an unknown flag, a bad value, a wrong number of arguments.
// agentbox prints it with the command's usage line and exits 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usage marks err, if any, as a usage error.
func usage(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}

// flagError is every command's FlagErrorFunc: a value the flag refused
// says what the flag wants, not what the parser said.
func flagError(_ *cobra.Command, err error) error {
	var bad *pflag.InvalidValueError
	if !errors.As(err, &bad) {
		return usageError{err}
	}
	f := bad.GetFlag()
	want := bad.Unwrap()
	var ours wantErr
	if !errors.As(want, &ours) {
		want = wantErr(wantOfType(f.Value.Type()))
	}
	return usageError{fmt.Errorf("--%s %s: %w", f.Name, quoteIfNeeded(bad.GetValue()), want)}
}

// wantOfType is what a flag of one of pflag's own types wants.
func wantOfType(typ string) string {
	switch {
	case strings.HasPrefix(typ, "int"), strings.HasPrefix(typ, "uint"):
		return "want a whole number"
	case strings.HasPrefix(typ, "float"):
		return "want a number"
	case typ == "bool":
		return "want true or false"
	}
	return "want a " + typ
}

func quoteIfNeeded(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\n\"'") {
		return strconv.Quote(s)
	}
	return s
}

// checkUsage makes every command below c report a wrong command line as
// a usageError: a wrong number of arguments says what the command takes,
// and a command that only groups others refuses an unknown one (cobra
// would print the help and exit 0).
func checkUsage(c *cobra.Command) {
	switch {
	case c.HasSubCommands() && !c.Runnable():
		c.Args = unknownCommand
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		c.DisableFlagsInUseLine = true // it runs no command line of its own
	case c.Args != nil:
		check := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			if check(cmd, args) != nil {
				return usageError{argsError(cmd, args)}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		checkUsage(sub)
	}
}

// unknownCommand refuses an argument of a command that only groups
// others, suggesting the nearest.
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	cmd.SuggestionsMinimumDistance = cmp.Or(cmd.SuggestionsMinimumDistance, 2)
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usageError{errors.New(msg)}
}

// argsError says what arguments cmd takes, from its Use line, and what
// it was given.
func argsError(cmd *cobra.Command, args []string) error {
	want := strings.TrimSpace(strings.Replace(strings.TrimPrefix(cmd.Use, cmd.Name()), "[flags]", "", 1))
	got := "none"
	if len(args) > 0 {
		got = fmt.Sprintf("%d: %s", len(args), strings.Join(quoteAll(args), " "))
	}
	if want == "" {
		return fmt.Errorf("%s takes no arguments; got %s", cmd.CommandPath(), got)
	}
	hint := ""
	if len(args) > 1 && (strings.HasSuffix(want, "TASK") || strings.HasSuffix(want, "MESSAGE")) {
		hint = " (quote a text of several words)"
	}
	return fmt.Errorf("%s takes %s; got %s%s", cmd.CommandPath(), want, got, hint)
}

// quoteAll is args as an error shows them: quoted where needed, a long
// one cut.
func quoteAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if r := []rune(a); len(r) > 40 {
			a = string(r[:40]) + "…"
		}
		out[i] = quoteIfNeeded(a)
	}
	return out
}
