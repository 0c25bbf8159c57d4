package output

import (
	"sync"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// tableStateName is what walshadow_table_state{table,state} reports of a
// relation: 1 for its current state, 0 for the state it left.
type tableStateName string

const (
	stateFollowing tableStateName = "following" // its changes are written as they come
	stateLoading   tableStateName = "loading"   // an initial load or a reload is filling its table
	stateFailed    tableStateName = "failed"    // it could not take a change; not written until reloaded
	stateLeft      tableStateName = "left"      // out of the configured scope: its table keeps its rows
	stateDropped   tableStateName = "dropped"   // dropped on the source
	// parked: it failed, and the same failure came again after a reload:
	// neither loaded nor written until something that could cure it
	// changes (park.go). The reason is in the log and walshadow status,
	// not in a label (one series per table and state).
	stateParked tableStateName = "parked"
)

// tableStates keeps each table's state and its gauge. It is safe for
// concurrent use (loads publish from their own goroutines).
type tableStates struct {
	gauge *service.MetricGauge // nil without metrics
	mu    sync.Mutex
	now   map[string]tableStateName
}

func newTableStates(m *service.Metrics) *tableStates {
	ts := &tableStates{now: map[string]tableStateName{}}
	if m != nil {
		ts.gauge = m.NewGauge("walshadow_table_state", "table", "state")
	}
	return ts
}

// set records table's state (schema.table of the source).
func (s *tableStates) set(table string, state tableStateName) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.now[table]
	if had && old == state {
		return
	}
	s.now[table] = state
	if s.gauge != nil {
		if had {
			s.gauge.Set(0, table, string(old))
		}
		s.gauge.Set(1, table, string(state))
	}
}
