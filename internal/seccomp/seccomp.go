// Package seccomp owns the seccomp profile every sandbox runs under, in
// Docker's JSON format (seccomp.json): the container tiers hand the JSON to
// the engine, which compiles it, and a microVM's guest, where no engine
// runs, compiles the same file into a BPF program itself (Policy, Apply).
// One file is the truth for both tiers.
//
// The profile is Docker's default profile (github.com/moby/profiles/seccomp
// v0.1.0, the one Docker 28.5 ships) less the syscalls docs/security.md
// lists, io_uring first. The file is generated, not edited: change
// removedSyscalls in profile_test.go and run
//
//	go test ./internal/seccomp/ -run TestSeccompProfile -update
package seccomp

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
)

// JSON is the profile, as Docker reads it.
//
//go:embed seccomp.json
var JSON []byte

// Profile is a Docker seccomp profile as far as Docker's default uses the
// format. Decoding refuses unknown fields, so an upstream that starts using
// one fails to parse instead of losing it.
type Profile struct {
	DefaultAction   string `json:"defaultAction"`
	DefaultErrnoRet *uint  `json:"defaultErrnoRet,omitempty"`
	ArchMap         []Arch `json:"archMap"`
	Syscalls        []Rule `json:"syscalls"`
}

// Arch maps an architecture to the sub-architectures Docker also allows.
type Arch struct {
	Arch      string   `json:"architecture"`
	SubArches []string `json:"subArchitectures"`
}

// Rule is one entry of a profile's syscalls: an action for its names,
// when its arguments match and the process meets Includes and not Excludes.
type Rule struct {
	Names    []string `json:"names"`
	Action   string   `json:"action"`
	ErrnoRet *uint    `json:"errnoRet,omitempty"`
	Args     []Arg    `json:"args,omitempty"`
	Comment  string   `json:"comment,omitempty"`
	Includes *Filter  `json:"includes,omitempty"`
	Excludes *Filter  `json:"excludes,omitempty"`
}

// Arg compares one argument of a syscall (libseccomp's SCMP_CMP_*).
type Arg struct {
	Index    uint   `json:"index"`
	Value    uint64 `json:"value"`
	ValueTwo uint64 `json:"valueTwo,omitempty"`
	Op       string `json:"op"`
}

// Filter conditions a rule on the process's capabilities, the
// architecture (Go's names) and the kernel's version.
type Filter struct {
	Caps      []string `json:"caps,omitempty"`
	Arches    []string `json:"arches,omitempty"`
	MinKernel string   `json:"minKernel,omitempty"`
}

// Parse decodes a profile, refusing fields the types above do not know.
func Parse(b []byte) (Profile, error) {
	var p Profile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("parse seccomp profile: %w", err)
	}
	return p, nil
}
