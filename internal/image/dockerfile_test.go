package image

import (
	"strings"
	"testing"
)

func TestCheckDockerfile(t *testing.T) {
	const base = "agentbox-sandbox:latest"
	good := map[string]string{
		"by name":          "FROM agentbox-sandbox\nRUN echo hi > /opt/x\n",
		"by full name":     "from docker.io/library/agentbox-sandbox:latest\n",
		"ARG BASE":         "# a comment\nARG BASE\nFROM $BASE\nUSER root\n",
		"ARG BASE default": "ARG BASE=debian\nFROM ${BASE} AS build\nRUN make\nFROM build\n",
		"stages":           "FROM agentbox-sandbox AS Build\nRUN make\nFROM agentbox-sandbox\nCOPY --from=build /out /opt/out\nCOPY --from=0 /a /b\n",
		"continuation":     "FROM agentbox-sandbox\nRUN apt-get update && \\\n# inside\n\n    apt-get install -y jq\n",
		"escape directive": "# escape=`\nFROM agentbox-sandbox\nRUN echo a `\n  b\n",
		"syntax directive": "# syntax=docker/dockerfile:1\nFROM agentbox-sandbox\n",
		"onbuild":          "FROM agentbox-sandbox\nONBUILD COPY --from=elsewhere /a /b\n",
	}
	for name, src := range good {
		if err := checkDockerfile(src, base); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad := map[string]string{
		"other image":          "FROM debian:bookworm\n",
		"scratch":              "FROM scratch\n",
		"other tag":            "FROM agentbox-sandbox:old\n",
		"a second stage pulls": "FROM agentbox-sandbox AS a\nFROM python:3\n",
		"undeclared BASE":      "FROM $BASE\n",
		"other variable":       "ARG IMG=agentbox-sandbox\nFROM $IMG\n",
		"BASE with default":    "ARG BASE\nFROM ${BASE:-debian}\n",
		"platform":             "FROM --platform=linux/arm64 agentbox-sandbox\n",
		"copy from an image":   "FROM agentbox-sandbox\nCOPY --from=busybox /bin/busybox /bin/\n",
		"copy from later":      "FROM agentbox-sandbox\nCOPY --from=1 /a /b\nFROM agentbox-sandbox\n",
		"no FROM":              "# nothing\n",
		"RUN first":            "RUN id\nFROM agentbox-sandbox\n",
		"dangling":             "FROM agentbox-sandbox\nRUN a \\\n",
		"ARG BASE after FROM":  "FROM agentbox-sandbox\nARG BASE\nFROM $BASE\n",
	}
	for name, src := range bad {
		err := checkDockerfile(src, base)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.HasPrefix(name, "other") && !strings.Contains(err.Error(), "FROM "+base) {
			t.Errorf("%s: %v does not say how to fix it", name, err)
		}
	}
}

func TestDockerignore(t *testing.T) {
	rules := func(lines ...string) []ignoreRule {
		var out []ignoreRule
		for _, l := range lines {
			r := ignoreRule{}
			l, r.include = strings.CutPrefix(l, "!")
			re, err := globRegexp(l)
			if err != nil {
				t.Fatal(err)
			}
			r.re = re
			out = append(out, r)
		}
		return out
	}
	rs := rules("node_modules", "*.log", "**/*.tmp", "build/*", "!build/keep.txt", "secret?")
	for rel, want := range map[string]bool{
		"node_modules":              true,
		"node_modules/x/y.js":       true,
		"src/node_modules":          false, // patterns are anchored at the root
		"app.log":                   true,
		"logs/app.log":              false,
		"a/b/c.tmp":                 true,
		"c.tmp":                     true,
		"build/out.bin":             true,
		"build/keep.txt":            false,
		"build":                     false,
		"secret1":                   true,
		"secret12":                  false,
		"Dockerfile":                false,
		"src/main.go":               false,
		"build/keep.txt/impossible": false,
	} {
		if got := ignored(rs, rel); got != want {
			t.Errorf("ignored(%q) = %v, want %v", rel, got, want)
		}
	}
}
