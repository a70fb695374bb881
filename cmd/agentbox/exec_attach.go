package main

import "github.com/agentbox/agentbox/internal/wiring"

// exitOutputCut is exec's exit status when the output was cut.
const exitOutputCut = wiring.ExitOutputCut
