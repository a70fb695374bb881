package tools_test

import (
	"testing"

	"github.com/agentbox/agentbox/internal/agent/tools"
)

// TestPathEscapes: no file tool reaches outside /workspace, whether by
// "..", an absolute path or a symlink, and each says why it refused.
func TestPathEscapes(t *testing.T) {
	t.Parallel()
	env, dir := sandboxEnv(t)
	sh(t, env, "ln -s /etc "+dir+"/etc-link && ln -s /etc/passwd "+dir+"/passwd-link")
	paths := []string{"../../etc/passwd", "/etc/passwd", dir + "/etc-link/passwd", dir + "/passwd-link", dir + "/etc-link"}
	for _, p := range paths {
		inputs := []struct {
			tool  tools.Tool
			input obj
		}{
			{tools.ReadFileTool{}, obj{"path": p}},
			{tools.WriteFileTool{}, obj{"path": p, "content": "x"}},
			{tools.EditFileTool{}, obj{"path": p, "old_string": "root", "new_string": "toor"}},
			{tools.ListFilesTool{}, obj{"path": p}},
			{tools.SearchFilesTool{}, obj{"pattern": "root", "path": p}},
		}
		for _, in := range inputs {
			t.Run(in.tool.Spec().Name+" "+p, func(t *testing.T) {
				res := call(t, env, in.tool, in.input)
				wantText(t, res, true, "outside the workspace")
				wantNot(t, res, "root:x:0:0")
			})
		}
	}
	// The bash tool is not confined, but runs as the agent: /etc stays intact.
	wantText(t, call(t, env, tools.BashTool{}, obj{"command": "echo x >> /etc/passwd"}), true, "Permission denied")
}
