package agent

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/egress"
)

// SystemPrompt is what the model is told about its situation, with the
// job's egress policy in force when it starts (the zero Effective: no
// network).
func SystemPrompt(network egress.Effective) string {
	return `You are an autonomous coding agent working inside an isolated Linux sandbox (Debian, user "agent", no root).
Your working directory is /workspace; everything you leave there is the result the user downloads.

` + NetworkPrompt(network) + ` Installed: Python 3 with pip, venv,
pytest, flask, requests, numpy, pandas, scipy and matplotlib; Node.js with TypeScript (tsc); git, curl, make
and a C compiler.

The sandbox has a virtual desktop (X display :1, DISPLAY is set for your commands) with xterm, Tk and
xdotool: start GUI programs with bash in the background, then look and act with the computer tool. The
python tool runs code in a persistent Jupyter kernel: variables and imports survive between calls, and
plots are saved into /workspace and shown to you.

Work in small verified steps: write code, run it, read the output, fix what failed, and run it again. Test
what you build (for example with pytest) before you finish. Start servers in the background with their
output redirected to a file, and stop them when you no longer need them.

When the task is done, call the finish tool with a short summary of what you built, how you verified it,
and where the files are. If the task cannot be done, call finish and explain why.`
}

// TaskMessage is the first user message of a job.
func TaskMessage(task string) string {
	return "Task:\n\n" + task
}

// nudge is said to a model that answered without using a tool.
const nudge = "Continue working on the task using the tools. When it is done and verified, call finish with a summary."

// promptHosts caps the entries of a list the prompt names.
const promptHosts = 40

// NetworkPrompt tells the model what the job's policy lets it reach and how:
// nothing (mode none), the hosts it names through the proxy (allow), or any
// public host but those denied (open), and which credentials the proxy adds.
func NetworkPrompt(e egress.Effective) string {
	const proxy = "through the HTTP(S) proxy already set in the environment (HTTP_PROXY, HTTPS_PROXY; ALL_PROXY socks5h for other TCP)"
	const noDNS = " DNS is not available inside: use host names through the proxy."
	var s string
	switch e.Mode {
	case egress.ModeAllow:
		s = "The sandbox has no direct network access. You can reach only these hosts " + proxy + ": " +
			promptRules(e.Allow) + " (ports 80 and 443 where none is given). Anything else is refused by the proxy." + noDNS
	case egress.ModeOpen:
		s = "The sandbox has no direct network access. You can reach any public host " + proxy +
			", except private, loopback and link-local addresses" + prefix(" and these denied hosts: ", promptRules(e.Deny)) + "." + noDNS
	default:
		return "The sandbox has no network access: packages cannot be downloaded."
	}
	return s + secretsPrompt(e.Secrets)
}

// secretsPrompt names, per secret, the hosts the proxy adds it for and the
// variable holding its placeholder.
func secretsPrompt(secrets map[string]egress.Secret) string {
	var sb strings.Builder
	for _, name := range slices.Sorted(maps.Keys(secrets)) {
		s := secrets[name]
		env := cmp.Or(s.Placeholder, s.Env, strings.ToUpper(name))
		fmt.Fprintf(&sb, " Credentials for %s are added by the proxy; the environment variable %s holds only a placeholder: use it as if it were the token.",
			capped(s.Hosts), env)
	}
	return sb.String()
}

// promptRules lists rules as the policy writes them, an entry that
// restricts methods with its methods.
func promptRules(rs []egress.Rule) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.String()
		if len(r.Methods) > 0 {
			s[i] += " (" + strings.Join(r.Methods, ", ") + " only)"
		}
	}
	return capped(s)
}

// capped joins the first promptHosts of s, saying how many more there are.
func capped(s []string) string {
	if len(s) > promptHosts {
		return strings.Join(s[:promptHosts], ", ") + fmt.Sprintf(" and %d more", len(s)-promptHosts)
	}
	return strings.Join(s, ", ")
}

func prefix(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}
