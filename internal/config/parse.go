package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/units"
)

// The parsers of Settings: each reads a value that is set and not empty
// into its field, and its error names the variable (key).

type parser = func(c *Config, key, v string) error

func str(field func(*Config) *string) parser {
	return func(c *Config, _, v string) error { *field(c) = v; return nil }
}

// trimmed keeps v without surrounding space; space alone is unset.
func trimmed(field func(*Config) *string) parser {
	return func(c *Config, _, v string) error {
		if v = strings.TrimSpace(v); v != "" {
			*field(c) = v
		}
		return nil
	}
}

func integer(field func(*Config) *int) parser {
	return func(c *Config, key, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%s: %q is not a whole number", key, v)
		}
		*field(c) = n
		return nil
	}
}

func count(field func(*Config) *int64) parser {
	return func(c *Config, key, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %q is not a whole number", key, v)
		}
		*field(c) = n
		return nil
	}
}

func size(field func(*Config) *int64) parser {
	return func(c *Config, key, v string) error {
		n, err := units.ParseSize(v)
		*field(c) = n
		return wrapEnv(key, err)
	}
}

func cpus(field func(*Config) *int64) parser {
	return func(c *Config, key, v string) error {
		n, err := units.ParseCPUs(v)
		*field(c) = n
		return wrapEnv(key, err)
	}
}

func duration(field func(*Config) *time.Duration) parser {
	return func(c *Config, key, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%s: %q is not a duration such as 30s or 10m", key, v)
		}
		*field(c) = d
		return nil
	}
}

func wrapEnv(key string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", key, err)
}

// images reads AGENTBOX_IMAGES (see parseImages).
func images(c *Config, _, v string) error {
	imgs, err := parseImages(v)
	c.Sandbox.Images = imgs
	return err
}

// uids reads AGENTBOX_SANDBOX_UIDS.
func uids(c *Config, key, v string) error {
	r, err := ParseUIDRange(v)
	c.Sandbox.UIDs = r
	return wrapEnv(key, err)
}

// displaySize reads AGENTBOX_DISPLAY_SIZE, WIDTHxHEIGHT.
func displaySize(c *Config, key, v string) error {
	if _, err := fmt.Sscanf(v, "%dx%d", &c.Sandbox.DisplayWidth, &c.Sandbox.DisplayHeight); err != nil {
		return fmt.Errorf("%s %q: want WIDTHxHEIGHT, like 1280x800", key, v)
	}
	return nil
}

// token reads AGENTBOX_TOKEN: the token the server accepts and the one
// the CLI sends.
func token(c *Config, _, v string) error {
	c.Server.Token, c.Client.Token = v, v
	return nil
}

// noAuth reads AGENTBOX_NO_AUTH: 1 or true turns auth off.
func noAuth(c *Config, _, v string) error {
	c.Server.NoAuth = v == "1" || v == "true"
	return nil
}

// maxCost reads AGENTBOX_MAX_COST, US dollars.
func maxCost(c *Config, key, v string) error {
	f, err := strconv.ParseFloat(v, 64)
	c.Agent.MaxCostUSD = f
	if err != nil {
		return fmt.Errorf("%s: %q is not a number of dollars such as 2.50", key, v)
	}
	return nil
}

// tokenHosts reads AGENTBOX_GIT_TOKEN_HOSTS: hosts, commas between.
func tokenHosts(c *Config, _, v string) error {
	c.Git.TokenHosts = nil
	for _, h := range strings.Split(v, ",") {
		if h = strings.TrimSpace(h); h != "" {
			c.Git.TokenHosts = append(c.Git.TokenHosts, h)
		}
	}
	return nil
}

// allowLocal reads AGENTBOX_GIT_ALLOW_LOCAL, true or false.
func allowLocal(c *Config, key, v string) error {
	switch v {
	case "1", "true":
		c.Git.AllowLocal = true
	case "0", "false":
		c.Git.AllowLocal = false
	default:
		return fmt.Errorf("%s %q: want true or false", key, v)
	}
	return nil
}
