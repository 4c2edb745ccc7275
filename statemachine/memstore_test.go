package statemachine

import (
	"github.com/geoevent/geoevent/core"
)

// histBlockLen is a length of history that the tests take as long.
const histBlockLen = 256

// Every state machine of these tests keeps its history in a MemStore of its
// own, which it reads and writes itself (Attach).
func init() { newSyncStore = func() SyncStore { return NewMemStore() } }

// History runs a whole history page against the state machine's SyncStore,
// as a replica does against its store: HistoryStart, the store's answer to
// the page's range, FinishHistory.
func (sm *StateMachine) History(opTS uint64, q *core.HistoryQuery) (core.QueryResult, error) {
	res, page, done, err := sm.HistoryStart(opTS, q)
	if done || err != nil {
		return res, err
	}
	a := sm.sync.Answer([]core.HistoryRead{{Kind: core.HistoryRangeRead, Range: page.Range}})
	return sm.FinishHistory(page, a[0].Events)
}

// discardStore is the benchmarks' history store: it drops the writes, as a
// replica hands them to IO, and finds nothing (their writes, at fresh
// timestamps, read nothing).
type discardStore struct{}

func (discardStore) Apply([]core.HistoryWrite) {}
func (discardStore) Answer(reads []core.HistoryRead) []core.HistoryAnswer {
	return make([]core.HistoryAnswer, len(reads))
}

// newBench returns a state machine whose history writes go nowhere: what a
// replica's state machine costs and holds.
func newBench() *StateMachine {
	sm := New()
	sm.Attach(discardStore{})
	return sm
}
