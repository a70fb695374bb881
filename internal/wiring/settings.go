package wiring

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/forge"
	"github.com/agentbox/agentbox/internal/githost"
)

// CheckConfig checks the settings config keeps as the environment states
// them, by the packages that read them where they are used: the git author
// (githost), the pull-request hosts (forge) and the egress settings
// (egress.Load). Run with config.FromEnv, so that a bad value stops every
// command at start, naming its variable.
func CheckConfig(cfg config.Config) error {
	var errs []error
	if _, _, err := githost.ParseAuthor(cfg.Git.Author); err != nil {
		errs = append(errs, fmt.Errorf("%w (AGENTBOX_GIT_AUTHOR)", err))
	}
	if _, err := forge.ParseHosts(cfg.Git.Hosts); err != nil {
		errs = append(errs, err)
	}
	if _, err := loadEgress(cfg); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// loadEgress reads and checks cfg's egress settings.
func loadEgress(cfg config.Config) (egress.Loaded, error) {
	e := cfg.Egress
	return egress.Load(egress.Settings{Presets: e.Presets, Secrets: e.Secrets, Modes: e.Modes, Default: e.Default,
		AllowPrivate: e.AllowPrivate, Resolve: e.Resolve, CA: e.CA})
}

// EgressPolicy is what a job's or a command's egress policy is checked
// against: cfg's presets, secrets, modes and default policy.
func EgressPolicy(cfg config.Config) (*egress.Config, error) {
	l, err := loadEgress(cfg)
	return l.Policy, err
}

// ApplyServeFlags sets in cfg, over the environment, the settings whose
// flags fs has as given (config.ApplyFlags), but --data-dir and --driver,
// which the root command applies for every command; then it checks the
// result as serve needs it.
func ApplyServeFlags(cfg *config.Config, fs *pflag.FlagSet) error {
	err := config.ApplyFlags(cfg, func(name string) (string, bool) {
		f := fs.Lookup(strings.TrimPrefix(name, "--"))
		if f == nil || !f.Changed || name == "--data-dir" || name == "--driver" {
			return "", false
		}
		return f.Value.String(), true
	})
	if err != nil {
		return err
	}
	if err := CheckViewURL(cfg.Server); err != nil {
		return err
	}
	return cfg.Validate()
}
