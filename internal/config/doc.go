package config

import (
	"errors"
	"slices"
	"strings"
)

// The markers around the settings table in docs/configuration.md, which
// SettingsTable makes (go run ./internal/config/gendoc writes it there).
const (
	TableStart = "<!-- settings table: made from config.Settings by `go run ./internal/config/gendoc`; edit internal/config/settings.go, not here -->"
	TableEnd   = "<!-- end of settings table -->"
)

// SettingsTable is the settings table of docs/configuration.md, in
// Markdown: a row per setting, the settings with SameRow in their
// predecessor's row.
func SettingsTable() string {
	var b strings.Builder
	b.WriteString("| variable | default | meaning |\n|---|---|---|\n")
	for i := 0; i < len(Settings); {
		row := []Setting{Settings[i]}
		for i++; i < len(Settings) && Settings[i].SameRow; i++ {
			row = append(row, Settings[i])
		}
		var envs, defs []string
		for _, s := range row {
			envs = append(envs, "`"+s.Env+"`")
			if d := s.DefaultText(); !slices.Contains(defs, d) {
				defs = append(defs, d)
			}
		}
		b.WriteString("| " + strings.Join(envs, ", ") + " | " + strings.Join(defs, ", ") + " | " + row[0].Help + " |\n")
	}
	return b.String()
}

// ReplaceTable returns doc with the text between TableStart and TableEnd
// replaced by table.
func ReplaceTable(doc, table string) (string, error) {
	start := strings.Index(doc, TableStart)
	end := strings.Index(doc, TableEnd)
	if start < 0 || end < start {
		return "", errors.New("settings table markers missing")
	}
	start += len(TableStart)
	return doc[:start] + "\n" + table + doc[end:], nil
}
