package render

import "testing"

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/home/me/proj": "/home/me/proj",
		"my proj":       "'my proj'",
		"it's":          `'it'\''s'`,
		"":              "''",
	} {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
