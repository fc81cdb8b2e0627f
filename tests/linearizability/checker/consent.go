package main

// The model's state and netpeer's consent rules on it (netpeer.core.consent):
// which halves match, what an unmatched half becomes, which pairs conflict,
// and how a write re-evaluates the halves it may affect.

import (
	"fmt"
	"sort"
	"strings"
)

// ---------------------------------------------------------------- state

type netState struct {
	present bool
	pid     int
}

type halfState struct {
	present bool
	remote  int // network index
	// The remote uid this half is pinned to: 0 none, 1+i the current
	// incarnation of network i, -1 an incarnation that was deleted (uids
	// are never reused, so every dead one compares alike).
	pin    int
	phase  int
	reason int
	rank   int // creation order among present halves (create_time)
}

// world is a decoded state, changed in place by a step on a copy.
type world struct {
	u      *universe
	nets   []netState
	halves []halfState
}

// netModelState is immutable: the encoded world and its universe.
type netModelState struct {
	u   *universe
	key string
}

func (s netModelState) decode() *world {
	w := &world{u: s.u, nets: make([]netState, len(s.u.nets)), halves: make([]halfState, len(s.u.slots))}
	b := []byte(s.key)
	if len(b) == 0 {
		return w
	}
	i := 0
	next := func() int { v := int(b[i])<<8 | int(b[i+1]); i += 2; return v }
	for n := range w.nets {
		w.nets[n].present = next() == 1
		w.nets[n].pid = next()
	}
	for h := range w.halves {
		w.halves[h].present = next() == 1
		w.halves[h].remote = next()
		w.halves[h].pin = next() - 1
		w.halves[h].phase = next()
		w.halves[h].reason = next()
		w.halves[h].rank = next()
	}
	return w
}

func (w *world) encode() netModelState {
	// Canonical: ranks renumbered 1..k in order, so equal worlds encode alike.
	order := []int{}
	for h := range w.halves {
		if w.halves[h].present {
			order = append(order, h)
		} else {
			w.halves[h] = halfState{}
		}
	}
	sort.Slice(order, func(i, j int) bool { return w.halves[order[i]].rank < w.halves[order[j]].rank })
	for k, h := range order {
		w.halves[h].rank = k + 1
	}
	b := make([]byte, 0, 4*len(w.nets)+12*len(w.halves))
	put := func(v int) { b = append(b, byte(v>>8), byte(v)) }
	for _, n := range w.nets {
		if n.present {
			put(1)
			put(n.pid)
		} else {
			put(0)
			put(0)
		}
	}
	for _, h := range w.halves {
		if h.present {
			put(1)
		} else {
			put(0)
		}
		put(h.remote)
		put(h.pin + 1)
		put(h.phase)
		put(h.reason)
		put(h.rank)
	}
	return netModelState{u: w.u, key: string(b)}
}

func (s netModelState) String() string {
	w := s.decode()
	var parts []string
	for i, n := range w.nets {
		if n.present {
			parts = append(parts, fmt.Sprintf("%s[%s]", w.u.nets[i], w.u.prefixSets[n.pid]))
		}
	}
	for i, h := range w.halves {
		if h.present {
			pin := ""
			if h.pin == -1 {
				pin = " pinned to a deleted network"
			}
			parts = append(parts, fmt.Sprintf("%s->%s %s/%s%s", w.u.slots[i], w.u.nets[h.remote],
				phaseNames[h.phase], reasonNames[h.reason], pin))
		}
	}
	if len(parts) == 0 {
		return "(empty)"
	}
	return strings.Join(parts, "; ")
}

// ---------------------------------------------------------------- consent

func (w *world) uid(n int) int { return n + 1 }

// find is the peering of network local whose remote is remote.
func (w *world) find(local, remote int) int {
	for _, h := range w.u.slotsOf[local] {
		if w.halves[h].present && w.halves[h].remote == remote {
			return h
		}
	}
	return -1
}

// partner is the other half of h when the two match (consent.partner).
func (w *world) partner(h int) int {
	p := w.halves[h]
	local, remote := w.u.slotNet[h], p.remote
	q := w.find(remote, local)
	if q < 0 || !w.nets[local].present || !w.nets[remote].present {
		return -1
	}
	if p.pin != 0 && p.pin != w.uid(remote) {
		return -1
	}
	if pin := w.halves[q].pin; pin != 0 && pin != w.uid(local) {
		return -1
	}
	return q
}

// replaced: the remote was re-created and its new incarnation consents.
func (w *world) replaced(h int) bool {
	p := w.halves[h]
	if p.pin == 0 {
		return false
	}
	local, remote := w.u.slotNet[h], p.remote
	q := w.find(remote, local)
	if q < 0 || !w.nets[local].present || !w.nets[remote].present || w.uid(remote) == p.pin {
		return false
	}
	pin := w.halves[q].pin
	return pin == 0 || pin == w.uid(local)
}

// unmatched is what an unmatched half becomes; ok false: it stays.
func (w *world) unmatched(h int) (int, int, bool) {
	p := w.halves[h]
	if w.replaced(h) {
		return pending, remoteReplaced, true
	}
	if p.phase == pending && p.reason != remoteReplaced {
		return 0, 0, false
	}
	return pending, remoteWithdrawn, true
}

func (w *world) boundPeers(n int) []int {
	var out []int
	for _, h := range w.u.slotsOf[n] {
		p := w.halves[h]
		if p.present && p.phase == bound && w.nets[p.remote].present {
			out = append(out, p.remote)
		}
	}
	return out
}

func (w *world) overlaps(a, b int) bool { return w.u.overlap[w.nets[a].pid][w.nets[b].pid] }

func (w *world) pairConflicts(local, remote int) bool {
	if w.overlaps(local, remote) {
		return true
	}
	for _, pair := range [][2]int{{local, remote}, {remote, local}} {
		side, other := pair[0], pair[1]
		for _, third := range w.boundPeers(side) {
			if third != other && w.overlaps(other, third) {
				return true
			}
		}
	}
	return false
}

func (w *world) prefixChangeConflicts(n, pid int) bool {
	for _, peer := range w.boundPeers(n) {
		if w.u.overlap[pid][w.nets[peer].pid] {
			return true
		}
		for _, third := range w.boundPeers(peer) {
			if third != n && w.u.overlap[pid][w.nets[third].pid] {
				return true
			}
		}
	}
	return false
}

func (w *world) transition(h, phase, reason, pin int) {
	p := &w.halves[h]
	p.phase, p.reason = phase, reason
	if pin != 0 {
		p.pin = pin
	}
}

// resolve re-evaluates the given halves (consent.resolve).
func (w *world) resolve(keys []int) {
	seen := map[int]bool{}
	var cands []int
	for _, h := range keys {
		if h >= 0 && !seen[h] && w.halves[h].present {
			seen[h] = true
			cands = append(cands, h)
		}
	}
	completed := func(h int) int {
		if q := w.partner(h); q >= 0 && w.halves[q].rank > w.halves[h].rank {
			return w.halves[q].rank
		}
		return w.halves[h].rank
	}
	sort.SliceStable(cands, func(i, j int) bool {
		ci, cj := completed(cands[i]), completed(cands[j])
		if ci != cj {
			return ci < cj
		}
		return cands[i] < cands[j] // slots are numbered in PeeringKey order
	})
	for _, h := range cands {
		if w.halves[h].present && w.halves[h].phase != pending && w.partner(h) < 0 {
			if phase, reason, ok := w.unmatched(h); ok {
				w.transition(h, phase, reason, 0)
			}
		}
	}
	for _, h := range cands {
		if !w.halves[h].present {
			continue
		}
		q := w.partner(h)
		if q < 0 {
			if phase, reason, ok := w.unmatched(h); ok {
				w.transition(h, phase, reason, 0)
			}
			continue
		}
		if w.halves[h].phase == bound && w.halves[q].phase == bound {
			continue
		}
		local, remote := w.u.slotNet[h], w.halves[h].remote
		if w.pairConflicts(local, remote) {
			w.transition(h, failed, overlapping, 0)
			w.transition(q, failed, overlapping, 0)
		} else {
			w.transition(h, bound, reasonBound, w.uid(remote))
			w.transition(q, bound, reasonBound, w.uid(local))
		}
	}
}

// affectedBy is consent.affected_by.
func (w *world) affectedBy(n int) []int {
	scope := append([]int{n}, w.boundPeers(n)...)
	var keys []int
	for _, m := range scope {
		for _, h := range w.u.slotsOf[m] {
			if !w.halves[h].present {
				continue
			}
			keys = append(keys, h)
			if q := w.find(w.halves[h].remote, m); q >= 0 {
				keys = append(keys, q)
			}
		}
	}
	return keys
}

func (w *world) hasHalves(n int) bool {
	for _, h := range w.u.slotsOf[n] {
		if w.halves[h].present {
			return true
		}
	}
	return false
}

func (w *world) failedOf(n int) []int {
	var out []int
	for _, h := range w.u.slotsOf[n] {
		if w.halves[h].present && w.halves[h].phase == failed {
			out = append(out, h)
		}
	}
	return out
}

func (w *world) maxRank() int {
	m := 0
	for _, h := range w.halves {
		if h.present && h.rank > m {
			m = h.rank
		}
	}
	return m
}
