package tools_test

import (
	"testing"

	"github.com/agentbox/agentbox/internal/agent/tools"
)

func TestRunCode(t *testing.T) {
	t.Parallel()
	env, dir := sandboxEnv(t)
	sh(t, env, "mkdir -p "+dir+"/lib && echo 'GREETING = \"hi from a module\"' > "+dir+"/lib/greet.py && touch "+dir+"/lib/__init__.py && echo 'a,b' > "+dir+"/in.csv")
	mod := "t." + dir[2:] + ".lib.greet" // t/<name>/lib/greet.py as a dotted module path
	cases := []toolCase{
		{"python", obj{"language": "python", "code": "import sys\nprint(sum(range(10)))\nprint('warn', file=sys.stderr)"}, false,
			[]string{"exit code: 0", "<stdout>\n45\n</stdout>", "<stderr>\nwarn\n</stderr>"}, nil},
		{"python exception", obj{"language": "python", "code": "x = 1\nprint('before')\nprint(x / 0)\n"}, true,
			[]string{"exit code: 1", "before", "Traceback (most recent call last):", `File "snippet.py", line 3`, "ZeroDivisionError: division by zero"},
			[]string{"/tmp/agentbox-run"}},
		{"python workspace", obj{"language": "python", "code": "import os\nfrom " + mod + " import GREETING\nprint(GREETING, os.getcwd())\nprint(open('" + dir + "/in.csv').read())"}, false,
			[]string{"hi from a module /workspace", "a,b"}, nil},
		{"python exit code", obj{"language": "python", "code": "raise SystemExit(4)"}, true, []string{"exit code: 4"}, nil},
		{"typescript", obj{"language": "typescript", "code": "import * as fs from 'fs';\nconst xs: number[] = [1, 2, 3];\nconst total = xs.reduce((a, b) => a + b, 0);\nconsole.log(`total=${total}`, process.cwd(), fs.existsSync('/workspace'));\n"}, false,
			[]string{"exit code: 0", "total=6 /workspace true"}, nil},
		{"typescript type error", obj{"language": "typescript", "code": "const n: number = 'five';\nconsole.log('RAN', n);\n"}, true,
			[]string{"TypeScript compile error", "the code was not run", "\nsnippet.ts(1,7): error TS2322", "Type 'string' is not assignable to type 'number'"},
			[]string{"RAN", "/tmp/agentbox-run"}},
		{"typescript throws", obj{"language": "typescript", "code": "function f(): never {\n  throw new Error('boom');\n}\nf();\n"}, true,
			[]string{"exit code: 1", "Error: boom", "snippet.ts:2"}, nil},
		{"timeout", obj{"language": "python", "code": "import time\nprint('started')\ntime.sleep(60)", "timeout_seconds": 5}, true,
			[]string{"timed out after 5s", "started"}, nil},
	}
	runCases(t, env, tools.RunCodeTool{}, cases)
	// Every snippet's temporary directory is gone, even the killed one's.
	wantText(t, call(t, env, tools.BashTool{}, obj{"command": "ls -d /tmp/agentbox-run-* 2>&1"}), true, "No such file or directory")
}
