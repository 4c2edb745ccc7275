package replica

// FeedLast returns the sequence of the newest fence notification the
// applied entries made (0: none): the IO layer compares it after each
// input and wakes the feed's readers when it has moved, so that they read
// the feed only when there is something new in it.
func (r *Replica) FeedLast() uint64 { return r.sm.FeedLast() }
