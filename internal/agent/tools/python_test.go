package tools_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/agent/tools"
)

// TestPython runs code in the sandbox's kernel: state is kept between
// calls, errors and timeouts are errors, plots come back as images.
func TestPython(t *testing.T) {
	env, dir := sandboxEnv(t)
	py := tools.PythonTool{}

	res := call(t, env, py, obj{"code": "import os\nanswer_base = 41\nprint('cwd', os.getcwd())"})
	wantText(t, res, false, "cwd /workspace\n")
	wantNot(t, res, "restarted")
	res = call(t, env, py, obj{"code": "answer_base + 1"})
	wantText(t, res, false, "]: 42\n")
	if !strings.HasPrefix(res.Text, "Out[") {
		t.Errorf("want Out[N]: 42, got %q", res.Text)
	}

	res = call(t, env, py, obj{"code": "print('before')\n1/0"})
	wantText(t, res, true, "before\nZeroDivisionError: division by zero\n", "1/0")
	wantText(t, call(t, env, py, obj{"code": "answer_base"}), false, "41")

	res = call(t, env, py, obj{"code": "import time\nprint('started', flush=True)\ntime.sleep(30)", "timeout_seconds": 1})
	wantText(t, res, true, "timed out after 1s", "started")
	wantText(t, call(t, env, py, obj{"code": "answer_base"}), false, "41") // interrupted, not restarted

	res = call(t, env, py, obj{"code": "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('" + dir + "')\nplt.show()"})
	wantText(t, res, false, "Saved image: /workspace/")
	if len(res.Images) != 1 || res.Images[0].MediaType != "image/png" || !bytes.HasPrefix(res.Images[0].Data, []byte("\x89PNG")) {
		t.Fatalf("images %d, want one PNG:\n%s", len(res.Images), res.Text)
	}
	path := strings.TrimSpace(strings.SplitN(strings.SplitN(res.Text, "Saved image: ", 2)[1], "\n", 2)[0])
	wantText(t, call(t, env, tools.BashTool{}, obj{"command": "test -s " + path + " && echo saved"}), false, "saved")
}

// TestPythonEmptyCode needs no sandbox: the code is checked first.
func TestPythonEmptyCode(t *testing.T) {
	wantText(t, call(t, &tools.Env{}, tools.PythonTool{}, obj{"code": "  \n"}), true, "code is empty")
	wantText(t, call(t, &tools.Env{}, tools.PythonTool{}, obj{"code": "1", "timeout_seconds": 0}), true, "between 1 and 1800")
}
