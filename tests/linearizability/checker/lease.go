package main

// The sweeper lease as clients see it: each replica answers, in its status,
// whether it leads now (its own lease, or the lease row naming it while the
// row has not expired). docs/replicas.md: another replica takes the row only
// once it has expired, and a replica that takes it holds it for leader_lease
// at least (the row's expiry is leader_lease after each renewal, the first
// one included), unless it gives it up on a clean stop (the fault runs never
// stop a replica cleanly).
//
// So a replica that took over at time T leads until T + leader_lease at
// least: nobody else can claim before. T itself comes after the last claim of
// the holder before it. A claim happened inside its call's interval, so when,
// in the order the checker tries, claims pass from A to B and then from B to
// C, C's first claim must return leader_lease or more after the call of A's
// last claim. A status that says "not leading" constrains nothing (a lease
// may lapse). A paused leader that keeps its lease and claims it between two
// claims of the replica that took over breaks this.

import (
	"fmt"
	"math"
)

type leaseInput struct {
	rec     *Record
	node    string
	leading bool
	call    int64
	ret     int64
}

type leaseState struct {
	holder   string
	since    int64 // a time before the holder took over (the previous holder's last claim's call)
	lastCall int64 // the latest call of the holder's claims so far
	ttl      int64
}

func leaseStep(state, input, output interface{}) (bool, interface{}) {
	s := state.(leaseState)
	in := input.(leaseInput)
	if !in.leading {
		return true, s
	}
	if s.holder == in.node || s.holder == "" {
		if s.holder == "" {
			s.since = math.MinInt64 / 2
		}
		if in.call > s.lastCall {
			s.lastCall = in.call
		}
		s.holder = in.node
		return true, s
	}
	if in.ret-s.since < s.ttl {
		return false, s
	}
	return true, leaseState{holder: in.node, since: s.lastCall, lastCall: in.call, ttl: s.ttl}
}

func describeLeaseOp(input, output interface{}) string {
	in := input.(leaseInput)
	if in.leading {
		return fmt.Sprintf("status %s => leading", in.node)
	}
	return fmt.Sprintf("status %s => not leading", in.node)
}

func describeLeaseState(state interface{}) string {
	s := state.(leaseState)
	if s.holder == "" {
		return "nobody has claimed the lease"
	}
	return fmt.Sprintf("%s leads", s.holder)
}
