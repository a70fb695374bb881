package image

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/imagename"
)

// A user's image is built on top of the sandbox image, and nothing is
// pulled: every stage of its Dockerfile starts FROM the sandbox image
// (by its name, or as $BASE after an ARG BASE, which the build sets to
// it) or FROM an earlier stage, and COPY --from names an earlier stage.
// checkDockerfile reads just enough of the Dockerfile's syntax (parser
// directives, comments, line continuations) to check that.

// instruction is one logical line of a Dockerfile.
type instruction struct {
	line int    // where it starts, 1-based
	cmd  string // upper case
	args []string
}

// checkDockerfile refuses a Dockerfile with a stage that does not start
// from base or an earlier stage, or a COPY --from of anything else.
func checkDockerfile(src, base string) error {
	ins, err := parseDockerfile(src)
	if err != nil {
		return err
	}
	baseName, err := imagename.Normalize(base)
	if err != nil {
		return err
	}
	c := stageChecker{base: baseName, fix: fromFix(base)}
	for _, in := range ins {
		if err := c.check(in); err != nil {
			return fmt.Errorf("Dockerfile line %d: %w", in.line, err)
		}
	}
	if len(c.stages) == 0 {
		return fmt.Errorf("Dockerfile has no FROM: %s", c.fix)
	}
	return nil
}

// stageChecker follows the stages of a Dockerfile.
type stageChecker struct {
	base, fix string
	argBase   bool     // ARG BASE came before the first FROM
	stages    []string // the stages so far, by name ("" when unnamed)
}

func (c *stageChecker) check(in instruction) error {
	switch in.cmd {
	case "ARG":
		if len(c.stages) == 0 && len(in.args) > 0 && strings.SplitN(in.args[0], "=", 2)[0] == "BASE" {
			c.argBase = true
		}
	case "FROM":
		return c.from(in.args)
	case "COPY":
		for _, a := range in.args {
			if v, ok := strings.CutPrefix(a, "--from="); ok && !c.isStage(v) {
				return fmt.Errorf("COPY --from=%s: only an earlier stage of this Dockerfile (nothing is pulled)", v)
			}
		}
	default:
		if len(c.stages) == 0 {
			return fmt.Errorf("%s before FROM: %s", in.cmd, c.fix)
		}
	}
	return nil
}

func (c *stageChecker) from(args []string) error {
	if len(args) > 0 && strings.HasPrefix(args[0], "--") {
		return fmt.Errorf("FROM %s: options to FROM are not allowed; %s", args[0], c.fix)
	}
	if len(args) != 1 && !(len(args) == 3 && strings.EqualFold(args[1], "AS")) {
		return fmt.Errorf("FROM %s: want FROM IMAGE [AS NAME]", strings.Join(args, " "))
	}
	img := args[0]
	switch {
	case img == "$BASE" || img == "${BASE}":
		if !c.argBase {
			return fmt.Errorf("FROM %s without ARG BASE before it: %s", img, c.fix)
		}
	case c.isStage(img):
	default:
		if n, err := imagename.Normalize(img); err != nil || n != c.base {
			return fmt.Errorf("FROM %s: %s (nothing is pulled)", img, c.fix)
		}
	}
	name := ""
	if len(args) == 3 {
		name = strings.ToLower(args[2])
	}
	c.stages = append(c.stages, name)
	return nil
}

// isStage reports whether ref names an earlier stage, by name or index.
func (c *stageChecker) isStage(ref string) bool {
	if n, err := strconv.Atoi(ref); err == nil {
		return n >= 0 && n < len(c.stages)
	}
	for _, s := range c.stages {
		if s != "" && s == strings.ToLower(ref) {
			return true
		}
	}
	return false
}

func fromFix(base string) string {
	return "a user image starts FROM the sandbox image: write `FROM " + base + "`, or `ARG BASE` and then `FROM $BASE` (agentbox sets BASE to it)"
}

// parseDockerfile splits src into instructions: parser directives and
// comments dropped, continued lines joined (comment and blank lines inside
// a continuation skipped, as the engine does).
func parseDockerfile(src string) ([]instruction, error) {
	lines := strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n")
	escape, first := directives(lines)
	var out []instruction
	var cur *instruction
	var text strings.Builder
	for i := first; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if cur == nil {
			cur = &instruction{line: i + 1}
		}
		body, cont := strings.CutSuffix(line, string(escape))
		text.WriteString(body)
		if cont {
			text.WriteByte(' ')
			continue
		}
		if fields := strings.Fields(text.String()); len(fields) > 0 {
			cur.cmd, cur.args = strings.ToUpper(fields[0]), fields[1:]
			out = append(out, *cur)
		}
		cur = nil
		text.Reset()
	}
	if cur != nil {
		return nil, fmt.Errorf("Dockerfile line %d: the last instruction ends in a line continuation", cur.line)
	}
	return out, nil
}

// directives reads the parser directives at the top of a Dockerfile: the
// escape character (default \) and the index of the first line after them.
func directives(lines []string) (escape rune, first int) {
	escape = '\\'
	for first < len(lines) {
		line := strings.TrimSpace(lines[first])
		d, ok := strings.CutPrefix(line, "#")
		k, v, isDirective := strings.Cut(d, "=")
		if !ok || !isDirective || strings.ContainsAny(strings.TrimSpace(k), " \t") {
			break
		}
		if strings.EqualFold(strings.TrimSpace(k), "escape") && strings.TrimSpace(v) == "`" {
			escape = '`'
		}
		first++
	}
	return escape, first
}
