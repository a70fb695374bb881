// Command gendoc writes the settings table of docs/configuration.md from
// config.Settings: go run ./internal/config/gendoc (from the repository's
// root, or name the file as its argument). TestSettingsDoc fails until it
// has run after a change to the table.
package main

import (
	"fmt"
	"os"

	"github.com/agentbox/agentbox/internal/config"
)

func main() {
	path := "docs/configuration.md"
	if len(os.Args) > 1 {
		path = os.Args[1]
	}
	if err := write(path); err != nil {
		fmt.Fprintln(os.Stderr, "gendoc:", err)
		os.Exit(1)
	}
}

func write(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc, err := config.ReplaceTable(string(b), config.SettingsTable())
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}
