package jobs

// Scheduler claims pending jobs and runs them (being written).
type Scheduler struct {
	hub *hub
}

func (s *Scheduler) wake()                {}
func (s *Scheduler) cancelLocal(id string) {}
