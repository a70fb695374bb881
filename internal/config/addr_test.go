package config

import "testing"

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:8080": true, "localhost:9": true, "[::1]:8080": true,
		"0.0.0.0:8080": false, "10.0.0.5:8080": false, "example.com:80": false, "127.0.0.1": false} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
