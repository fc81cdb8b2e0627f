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
	"sort"
	"strings"
)

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
	batch  []netInput // create_peerings: its creates, in order
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
	case "create_peerings":
		// All or nothing (netpeer.service.batch): the first that fails is the
		// answer, and the caller's step keeps nothing of this copy.
		for _, one := range in.batch {
			if code, _ := w.apply(one); code != "" {
				return code, res
			}
		}
		res.Peerings = []peeringOut{}
		for _, one := range in.batch { // read again: a later one may have bound an earlier one
			p := w.halves[one.slot]
			res.Peerings = append(res.Peerings, peeringOut{w.u.slotName[one.slot], phaseNames[p.phase],
				reasonNames[p.reason]})
		}
	case "unpin_peering":
		// UpdatePeering with remote.uid "": the half follows whatever network
		// carries its remote's name.
		if !w.halves[in.slot].present {
			return "NOT_FOUND", res
		}
		if p := w.halves[in.slot]; p.pin != 0 {
			if p.phase == bound {
				return "FAILED_PRECONDITION", res
			}
			w.halves[in.slot].pin = 0
			w.resolve([]int{in.slot, w.find(p.remote, in.net)})
		}
		res.Phase, res.Reason = phaseNames[w.halves[in.slot].phase], reasonNames[w.halves[in.slot].reason]
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
	case "create_peering", "get_peering", "unpin_peering":
		return g.Phase == want.Phase && g.Reason == want.Reason
	case "create_peerings":
		return samePeerings(want.Peerings, nonNilP(g.Peerings))
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
	case "delete_peering", "get_peering", "unpin_peering":
		call = fmt.Sprintf("%s %s/%s/%s", in.f, a.NS, a.Network, a.Peering)
	case "create_peerings":
		var parts []string
		for _, h := range a.Halves {
			parts = append(parts, fmt.Sprintf("%s/%s/%s -> %s/%s", h.NS, h.Network, h.Peering, h.RemoteNS,
				h.RemoteNetwork))
		}
		call = fmt.Sprintf("%s [%s]", in.f, strings.Join(parts, ", "))
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
	case "create_peering", "get_peering", "unpin_peering":
		return fmt.Sprintf("%s/%s", r.Phase, r.Reason)
	case "create_peerings":
		return describePeerings(r.Peerings)
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
	for _, h := range a.Halves {
		in.batch = append(in.batch, netInput{rec: r, u: u, f: "create_peering", net: u.netIndex[h.NS+"/"+h.Network],
			slot: u.slotIndex[h.NS+"/"+h.Network+"/"+h.Peering], remote: u.netIndex[h.RemoteNS+"/"+h.RemoteNetwork]})
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
		if r.F == "create_peering" || r.F == "get_peering" || r.F == "unpin_peering" {
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
