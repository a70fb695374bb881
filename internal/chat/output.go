package chat

import "github.com/agentbox/agentbox/internal/event"

// output shows a call's commands' output as it is produced, under its
// step; nothing is held back, so flush has nothing to do.
func (s *Session) output(call string) (func(stream string, p []byte), func()) {
	write := func(stream string, p []byte) { s.emit(event.Output{Call: call, Stream: stream, Text: string(p)}) }
	return write, func() {}
}
