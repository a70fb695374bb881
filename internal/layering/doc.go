// Package layering holds no code: its test checks agentbox's import
// layers (layering_test.go), so that a package that imports upwards (a
// sandbox driver importing doctor, config importing a package it
// configures) fails the build's tests instead of slowly tangling the tree.
package layering
