package doctor

import (
	"encoding/json"
	"fmt"
	"io"
)

// Write writes checks as `agentbox doctor` shows them: one line each,
// marked ok, WARN or FAIL, with its fix under it; or, asJSON, as an
// indented JSON array.
func Write(w io.Writer, checks []Check, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(checks)
		return
	}
	mark := map[string]string{OK: "ok  ", Warn: "WARN", Fail: "FAIL"}
	for _, c := range checks {
		fmt.Fprintf(w, "%s  %-13s %s\n", mark[c.Status], c.Name, c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(w, "      %-13s fix: %s\n", "", c.Fix)
		}
	}
}
