package main

// netpeer's sequential model within one site: networks, the halves of
// peerings, and the phase each half is in. It follows netpeer.core.consent
// and netpeer.service.operations step by step: which peerings a write
// re-evaluates (consent.affected_by, effects.remove_peering), in which order
// (the pair completed first), and what each re-evaluation decides. The
// answer of every call is compared with what the model answers in the
// state the linearization has reached.
//
// One model instance covers one group of the workload: a few networks in
// namespaces of their own, with halves only between them. Nothing a call
// on one group does reads or changes another group (names, prefixes and
// Bound peers are all inside it), so each group is an independent object
// and the history is linearizable if and only if each group's part is
// (linearizability is local: Herlihy and Wing, 1990).

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

const (
	pending = iota
	bound
	failed
)

var phaseNames = []string{"Pending", "Bound", "Failed"}

const (
	awaitingRemote = iota
	reasonBound
	overlapping
	remoteWithdrawn
	remoteReplaced
)

var reasonNames = []string{"AwaitingRemote", "Bound", "OverlappingPrefixes", "RemoteWithdrawn", "RemoteReplaced"}

func phaseIndex(s string) int {
	for i, n := range phaseNames {
		if n == s {
			return i
		}
	}
	return -1
}

func reasonIndex(s string) int {
	for i, n := range reasonNames {
		if n == s {
			return i
		}
	}
	return -1
}

// universe is what one group's operations name: its networks, its
// peerings (by network and name) and the prefix sets its networks take.
type universe struct {
	group      string
	nets       []string // "ns/name", sorted
	netNS      []string
	netName    []string
	netIndex   map[string]int
	slots      []string // "ns/network/peering", sorted (PeeringKey order)
	slotNet    []int
	slotName   []string
	slotIndex  map[string]int
	slotsOf    [][]int // per network, its slots in name order
	namespaces map[string][]int
	prefixSets []prefixSet
	prefixIdx  map[string]int
	overlap    [][]bool
}

type prefixSet struct {
	subnets []string
	routes  []string
	parsed  []netip.Prefix
}

func (p prefixSet) key() string {
	return strings.Join(p.subnets, ",") + "|" + strings.Join(p.routes, ",")
}

func (p prefixSet) String() string {
	s := strings.Join(p.subnets, ",")
	if len(p.routes) > 0 {
		s += "+" + strings.Join(p.routes, ",")
	}
	return s
}

func prefixesOverlap(a, b prefixSet) bool {
	for _, x := range a.parsed {
		for _, y := range b.parsed {
			if x.Addr().Is4() == y.Addr().Is4() && x.Overlaps(y) {
				return true
			}
		}
	}
	return false
}

type netArgs struct {
	NS            string   `json:"ns"`
	Network       string   `json:"network"`
	Peering       string   `json:"peering"`
	RemoteNS      string   `json:"remote_ns"`
	RemoteNetwork string   `json:"remote_network"`
	RemoteSite    string   `json:"remote_site"`
	Subnets       []string `json:"subnets"`
	Routes        []string `json:"routes"`
}

type peeringOut struct {
	Name   string `json:"name"`
	Phase  string `json:"phase"`
	Reason string `json:"reason"`
}

type networkOut struct {
	Name     string       `json:"name"`
	Subnets  []string     `json:"subnets"`
	Routes   []string     `json:"routes"`
	Peerings []peeringOut `json:"peerings"`
}

type netResult struct {
	// a peering
	Phase  string `json:"phase"`
	Reason string `json:"reason"`
	// a network
	Subnets  []string     `json:"subnets"`
	Routes   []string     `json:"routes"`
	Peerings []peeringOut `json:"peerings"`
	// a list
	Networks []networkOut `json:"networks"`
}

// newUniverse collects what a group's records name.
func newUniverse(group string, recs []*Record) (*universe, error) {
	u := &universe{group: group, netIndex: map[string]int{}, slotIndex: map[string]int{},
		namespaces: map[string][]int{}, prefixIdx: map[string]int{}}
	nets := map[string]bool{}
	slots := map[string]bool{}
	nss := map[string]bool{}
	for _, r := range recs {
		var a netArgs
		r.args(&a)
		nss[a.NS] = true
		if a.Network != "" {
			nets[a.NS+"/"+a.Network] = true
		}
		if a.RemoteNetwork != "" {
			nets[a.RemoteNS+"/"+a.RemoteNetwork] = true
			nss[a.RemoteNS] = true
		}
		if a.Peering != "" {
			slots[a.NS+"/"+a.Network+"/"+a.Peering] = true
		}
		if r.F == "create_network" || r.F == "update_network" {
			if _, err := u.prefixID(a.Subnets, a.Routes); err != nil {
				return nil, badLine("", r.Line, "%s: %v", r.F, err)
			}
		}
	}
	for n := range nets {
		u.nets = append(u.nets, n)
	}
	sort.Strings(u.nets)
	for i, n := range u.nets {
		u.netIndex[n] = i
		parts := strings.SplitN(n, "/", 2)
		u.netNS = append(u.netNS, parts[0])
		u.netName = append(u.netName, parts[1])
		u.namespaces[parts[0]] = append(u.namespaces[parts[0]], i)
	}
	for ns := range nss {
		if _, ok := u.namespaces[ns]; !ok {
			u.namespaces[ns] = nil
		}
	}
	for s := range slots {
		u.slots = append(u.slots, s)
	}
	// PeeringKey order: namespace, network, name.
	sort.Slice(u.slots, func(i, j int) bool {
		a, b := strings.SplitN(u.slots[i], "/", 3), strings.SplitN(u.slots[j], "/", 3)
		for k := 0; k < 3; k++ {
			if a[k] != b[k] {
				return a[k] < b[k]
			}
		}
		return false
	})
	u.slotsOf = make([][]int, len(u.nets))
	for i, s := range u.slots {
		u.slotIndex[s] = i
		parts := strings.SplitN(s, "/", 3)
		n := u.netIndex[parts[0]+"/"+parts[1]]
		u.slotNet = append(u.slotNet, n)
		u.slotName = append(u.slotName, parts[2])
		u.slotsOf[n] = append(u.slotsOf[n], i)
	}
	if len(u.nets) > 250 || len(u.slots) > 250 || len(u.prefixSets) > 60000 {
		return nil, fmt.Errorf("group %s names too many networks (%d) or peerings (%d) for the model", group,
			len(u.nets), len(u.slots))
	}
	u.overlap = make([][]bool, len(u.prefixSets))
	for i := range u.prefixSets {
		u.overlap[i] = make([]bool, len(u.prefixSets))
		for j := range u.prefixSets {
			u.overlap[i][j] = prefixesOverlap(u.prefixSets[i], u.prefixSets[j])
		}
	}
	return u, nil
}

func (u *universe) prefixID(subnets, routes []string) (int, error) {
	p := prefixSet{subnets: append([]string{}, subnets...), routes: append([]string{}, routes...)}
	if id, ok := u.prefixIdx[p.key()]; ok {
		return id, nil
	}
	for _, s := range append(append([]string{}, subnets...), routes...) {
		parsed, err := netip.ParsePrefix(s)
		if err != nil {
			return 0, fmt.Errorf("%q is not a prefix", s)
		}
		p.parsed = append(p.parsed, parsed.Masked())
	}
	u.prefixSets = append(u.prefixSets, p)
	u.prefixIdx[p.key()] = len(u.prefixSets) - 1
	return len(u.prefixSets) - 1, nil
}

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

// ---------------------------------------------------------------- operations

type netInput struct {
	rec    *Record
	u      *universe
	f      string
	net    int
	slot   int
	remote int
	pid    int
	ns     string
}

// netOutput is what a call answered: "" code for ok.
type netOutput struct {
	unknown bool
	code    string
	result  netResult
}

func (w *world) view(n int) networkOut {
	ps := w.u.prefixSets[w.nets[n].pid]
	out := networkOut{Name: w.u.netName[n], Subnets: ps.subnets, Routes: ps.routes, Peerings: []peeringOut{}}
	if out.Routes == nil {
		out.Routes = []string{}
	}
	for _, h := range w.u.slotsOf[n] {
		if p := w.halves[h]; p.present {
			out.Peerings = append(out.Peerings, peeringOut{w.u.slotName[h], phaseNames[p.phase], reasonNames[p.reason]})
		}
	}
	return out
}

// apply runs one call on w (a copy) and says what netpeer answers.
func (w *world) apply(in netInput) (string, netResult) {
	var res netResult
	switch in.f {
	case "create_network":
		if w.nets[in.net].present {
			return "ALREADY_EXISTS", res
		}
		w.nets[in.net] = netState{present: true, pid: in.pid}
		// Nothing can point at a network that did not exist and be
		// matched: consent.affected_by finds nothing to re-evaluate.
		v := w.view(in.net)
		res.Subnets, res.Routes, res.Peerings = v.Subnets, v.Routes, v.Peerings
	case "update_network":
		if !w.nets[in.net].present {
			return "NOT_FOUND", res
		}
		if w.nets[in.net].pid != in.pid {
			if w.prefixChangeConflicts(in.net, in.pid) {
				return "FAILED_PRECONDITION", res
			}
			w.nets[in.net].pid = in.pid
			w.resolve(w.affectedBy(in.net))
		}
		v := w.view(in.net)
		res.Subnets, res.Routes, res.Peerings = v.Subnets, v.Routes, v.Peerings
	case "delete_network":
		if !w.nets[in.net].present {
			return "NOT_FOUND", res
		}
		if w.hasHalves(in.net) {
			return "FAILED_PRECONDITION", res
		}
		w.nets[in.net] = netState{}
		for h := range w.halves {
			if w.halves[h].present && w.halves[h].pin == w.uid(in.net) {
				w.halves[h].pin = -1
			}
		}
	case "create_peering":
		if !w.nets[in.net].present {
			return "NOT_FOUND", res
		}
		if w.halves[in.slot].present || w.find(in.net, in.remote) >= 0 {
			return "ALREADY_EXISTS", res
		}
		w.halves[in.slot] = halfState{present: true, remote: in.remote, phase: pending, reason: awaitingRemote,
			rank: w.maxRank() + 1}
		w.resolve([]int{in.slot, w.find(in.remote, in.net)})
		res.Phase, res.Reason = phaseNames[w.halves[in.slot].phase], reasonNames[w.halves[in.slot].reason]
	case "delete_peering":
		if !w.halves[in.slot].present {
			return "NOT_FOUND", res
		}
		local, remote := in.net, w.halves[in.slot].remote
		w.halves[in.slot] = halfState{}
		keys := []int{w.find(remote, local)}
		keys = append(keys, w.failedOf(local)...)
		keys = append(keys, w.failedOf(remote)...)
		w.resolve(keys)
	case "get_peering":
		if !w.halves[in.slot].present {
			return "NOT_FOUND", res
		}
		res.Phase, res.Reason = phaseNames[w.halves[in.slot].phase], reasonNames[w.halves[in.slot].reason]
	case "list_networks":
		res.Networks = []networkOut{}
		nets := append([]int{}, w.u.namespaces[in.ns]...)
		sort.Slice(nets, func(i, j int) bool { return w.u.netName[nets[i]] < w.u.netName[nets[j]] })
		for _, n := range nets {
			if w.nets[n].present {
				res.Networks = append(res.Networks, w.view(n))
			}
		}
	}
	return "", res
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func samePeerings(a, b []peeringOut) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sameNetwork(a, b networkOut) bool {
	return a.Name == b.Name && sameStrings(a.Subnets, b.Subnets) && sameStrings(a.Routes, b.Routes) &&
		samePeerings(a.Peerings, b.Peerings)
}

// matches says whether what the call answered is what the model answers.
func matches(f, code string, want netResult, got netOutput) bool {
	if got.code != code {
		return false
	}
	if code != "" {
		return true
	}
	g := got.result
	switch f {
	case "create_network", "update_network":
		return sameNetwork(networkOut{"", want.Subnets, want.Routes, want.Peerings},
			networkOut{"", g.Subnets, nonNil(g.Routes), nonNilP(g.Peerings)})
	case "create_peering", "get_peering":
		return g.Phase == want.Phase && g.Reason == want.Reason
	case "list_networks":
		if len(g.Networks) != len(want.Networks) {
			return false
		}
		for i := range want.Networks {
			n := g.Networks[i]
			n.Routes, n.Peerings = nonNil(n.Routes), nonNilP(n.Peerings)
			if !sameNetwork(want.Networks[i], n) {
				return false
			}
		}
	}
	return true
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilP(s []peeringOut) []peeringOut {
	if s == nil {
		return []peeringOut{}
	}
	return s
}

func netStep(state, input, output interface{}) (bool, interface{}) {
	s := state.(netModelState)
	in := input.(netInput)
	out := output.(netOutput)
	if !out.unknown && out.code == "UNAVAILABLE" {
		return true, s // answered "nothing was changed": a step that changes nothing
	}
	w := s.decode()
	code, want := w.apply(in)
	if out.unknown {
		// It took effect here (or, linearized after everything, never).
		if code != "" {
			return true, s
		}
		return true, w.encode()
	}
	if !matches(in.f, code, want, out) {
		return false, s
	}
	if code != "" || in.rec.isRead() {
		return true, s
	}
	return true, w.encode()
}

func describeNetOp(input, output interface{}) string {
	in := input.(netInput)
	out := output.(netOutput)
	var a netArgs
	in.rec.args(&a)
	var call string
	switch in.f {
	case "create_network", "update_network":
		call = fmt.Sprintf("%s %s/%s %s", in.f, a.NS, a.Network, in.u.prefixSets[in.pid])
	case "delete_network":
		call = fmt.Sprintf("%s %s/%s", in.f, a.NS, a.Network)
	case "create_peering":
		call = fmt.Sprintf("%s %s/%s/%s -> %s/%s", in.f, a.NS, a.Network, a.Peering, a.RemoteNS, a.RemoteNetwork)
	case "delete_peering", "get_peering":
		call = fmt.Sprintf("%s %s/%s/%s", in.f, a.NS, a.Network, a.Peering)
	case "list_networks":
		call = fmt.Sprintf("%s %s", in.f, a.NS)
	}
	return call + " => " + describeNetOutput(in.f, out)
}

func describeNetOutput(f string, out netOutput) string {
	if out.unknown {
		return "unknown (" + out.code + ")"
	}
	if out.code != "" {
		return out.code
	}
	r := out.result
	switch f {
	case "create_network", "update_network":
		return "ok " + describePeerings(r.Peerings)
	case "create_peering", "get_peering":
		return fmt.Sprintf("%s/%s", r.Phase, r.Reason)
	case "list_networks":
		var parts []string
		for _, n := range r.Networks {
			parts = append(parts, fmt.Sprintf("%s[%s]%s", n.Name, strings.Join(append(append([]string{},
				n.Subnets...), n.Routes...), ","), describePeerings(n.Peerings)))
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return "ok"
}

func describePeerings(ps []peeringOut) string {
	var parts []string
	for _, p := range ps {
		parts = append(parts, fmt.Sprintf("%s:%s/%s", p.Name, p.Phase, p.Reason))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// netOperation turns a record into Porcupine's operation.
func netOperation(u *universe, r *Record, client int) (netInput, netOutput, error) {
	var a netArgs
	r.args(&a)
	in := netInput{rec: r, u: u, f: r.F, net: -1, slot: -1, remote: -1, ns: a.NS}
	if a.Network != "" {
		in.net = u.netIndex[a.NS+"/"+a.Network]
	}
	if a.Peering != "" {
		in.slot = u.slotIndex[a.NS+"/"+a.Network+"/"+a.Peering]
	}
	if a.RemoteNetwork != "" {
		in.remote = u.netIndex[a.RemoteNS+"/"+a.RemoteNetwork]
	}
	if r.F == "create_network" || r.F == "update_network" {
		in.pid, _ = u.prefixID(a.Subnets, a.Routes)
	}
	out := netOutput{}
	switch {
	case r.infiniteReturn:
		out.unknown = true
		out.code = r.Error
		if out.code == "" {
			out.code = "no answer"
		}
	case r.Outcome == "fail":
		out.code = r.Error
	case r.F == "delete_network" || r.F == "delete_peering":
	default:
		if err := decodeResult(r.Result, &out.result); err != nil {
			return in, out, badLine("", r.Line, "%s: result: %v", r.F, err)
		}
		for _, p := range append(append([]peeringOut{}, out.result.Peerings...), flatten(out.result.Networks)...) {
			if phaseIndex(p.Phase) < 0 || reasonIndex(p.Reason) < 0 {
				return in, out, badLine("", r.Line, "%s: result: phase %q/reason %q is not one netpeer answers "+
					"within a site", r.F, p.Phase, p.Reason)
			}
		}
		if r.F == "create_peering" || r.F == "get_peering" {
			if phaseIndex(out.result.Phase) < 0 || reasonIndex(out.result.Reason) < 0 {
				return in, out, badLine("", r.Line, "%s: result: phase %q/reason %q is not one netpeer answers "+
					"within a site", r.F, out.result.Phase, out.result.Reason)
			}
		}
	}
	return in, out, nil
}

func flatten(ns []networkOut) []peeringOut {
	var out []peeringOut
	for _, n := range ns {
		out = append(out, n.Peerings...)
	}
	return out
}
