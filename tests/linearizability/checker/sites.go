package main

// Across sites the guarantee is weaker on purpose (docs/cross-site.md): each
// site decides its own half from its own store and what the other site last
// told it, so the second half may answer Pending until the sites exchange,
// and a partition delays that exchange. What is checked:
//
//  1. each site alone is linearizable for what it decides by itself: its
//     halves exist or not (create, delete and read answer as one register per
//     half would), whatever their phase;
//  2. eventual agreement: once the last fault has healed and no more writes
//     come, within agree_within_s every read of a half shows the phase the two
//     halves imply (Bound when both exist, Pending otherwise), on both
//     sides; in particular no pair is Bound on one side while the other side
//     has withdrawn its half.
//
// Each site's halves are one partition per pair and site: a half's existence
// depends on its own calls only.

import (
	"fmt"
	"math"
	"sort"

	"github.com/anishathalye/porcupine"
)

// SitesReport is the figure of the cross-site checks.
type SitesReport struct {
	Pairs             int       `json:"pairs"`
	ReadsAfterHealing int       `json:"reads_after_healing"`
	Healed            int64     `json:"healed"`         // the end of the last fault (history time)
	AgreeWithin       float64   `json:"agree_within_s"` // the bound checked
	AgreedAfter       []float64 `json:"agreed_after_s"` // per pair: from healing to the first read of lasting agreement
	Disagreements     []string  `json:"disagreements"`
}

type halfInput struct {
	rec *Record
}

// halfState: whether the half exists.
type halfRegister bool

func halfStep(state, input, output interface{}) (bool, interface{}) {
	present := bool(state.(halfRegister))
	r := input.(halfInput).rec
	unknown := r.infiniteReturn
	if !unknown && r.Outcome == "fail" && r.Error == "UNAVAILABLE" {
		return true, state
	}
	switch r.F {
	case "create_half":
		if unknown {
			return true, halfRegister(true)
		}
		if r.Outcome == "ok" {
			return !present, halfRegister(true)
		}
		return r.Error == "ALREADY_EXISTS" && present, state
	case "delete_half":
		if unknown {
			return true, halfRegister(false)
		}
		if r.Outcome == "ok" {
			return present, halfRegister(false)
		}
		return r.Error == "NOT_FOUND" && !present, state
	case "get_half":
		if r.Outcome == "ok" {
			return present, state
		}
		return r.Error == "NOT_FOUND" && !present, state
	}
	return false, state
}

func describeHalfOp(input, output interface{}) string {
	r := input.(halfInput).rec
	var a netArgs
	r.args(&a)
	what := fmt.Sprintf("%s %s:%s/%s/%s", r.F, r.Site, a.NS, a.Network, a.Peering)
	switch {
	case r.infiniteReturn:
		return what + " => unknown"
	case r.Outcome == "fail":
		return what + " => " + r.Error
	case r.F == "get_half":
		var res netResult
		_ = decodeResult(r.Result, &res)
		return what + " => " + res.Phase + "/" + res.Reason
	}
	return what + " => ok"
}

// pairKey names the pair a half belongs to: the group and the sorted ends.
func pairKey(r *Record) (string, string, error) {
	var a netArgs
	r.args(&a)
	if r.Site == "" {
		return "", "", fmt.Errorf("%s: needs site", r.F)
	}
	local := r.Site + ":" + a.NS + "/" + a.Network
	half := local + "/" + a.Peering
	if r.F != "create_half" {
		return "", half, nil
	}
	if a.RemoteSite == "" || a.RemoteSite == r.Site {
		return "", "", fmt.Errorf("create_half: args.remote_site must name the other site")
	}
	return pairOf(local, a.RemoteSite+":"+a.RemoteNS+"/"+a.RemoteNetwork), half, nil
}

func pairOf(a, b string) string {
	if a > b {
		a, b = b, a
	}
	return a + " <-> " + b
}

func sitesPartitions(h *History, recs []*Record, s *Summary) ([]*partition, *SitesReport, error) {
	if h.Agree <= 0 {
		return nil, nil, inputError{fmt.Sprintf("%s: cross-site operations need the agreement bound (a meta line "+
			"with agree_within_s)", h.Path)}
	}
	byHalf := map[string][]*Record{}
	pairOfHalf := map[string]string{}
	halvesOfPair := map[string]map[string]bool{}
	for _, r := range recs {
		pair, half, err := pairKey(r)
		if err != nil {
			return nil, nil, badLine(h.Path, r.Line, "%v", err)
		}
		byHalf[half] = append(byHalf[half], r)
		if pair != "" {
			pairOfHalf[half] = pair
			if halvesOfPair[pair] == nil {
				halvesOfPair[pair] = map[string]bool{}
			}
			halvesOfPair[pair][half] = true
		}
	}
	names := make([]string, 0, len(byHalf))
	for half := range byHalf {
		if _, ok := pairOfHalf[half]; !ok {
			return nil, nil, inputError{fmt.Sprintf("%s: half %s is never created (create_half names its remote)",
				h.Path, half)}
		}
		names = append(names, half)
	}
	sort.Strings(names)
	var parts []*partition
	for _, half := range names {
		p := &partition{name: half}
		clients := dense{}
		for _, r := range byHalf[half] {
			if r.isRead() && (r.infiniteReturn || r.Error == "UNAVAILABLE") {
				s.DroppedReads++
				continue
			}
			if r.infiniteReturn {
				s.InDoubtWrites++
			}
			p.ops = append(p.ops, porcupine.Operation{ClientId: clients.id(*r.Process), Input: halfInput{r},
				Call: *r.Call, Return: r.returnTime(), Metadata: r})
			p.recs = append(p.recs, r)
		}
		p.model = porcupine.Model{
			Init:              func() interface{} { return halfRegister(false) },
			Step:              halfStep,
			DescribeOperation: describeHalfOp,
			DescribeState: func(st interface{}) string {
				if bool(st.(halfRegister)) {
					return "exists"
				}
				return "absent"
			},
			DescribeOperationMetadata: func(m interface{}) string { return describeRecord(m.(*Record)) },
		}
		parts = append(parts, p)
	}
	return parts, agreement(h, byHalf, pairOfHalf, halvesOfPair), nil
}

// agreement checks the reads made after the last fault healed and the
// last write returned (plus the bound).
func agreement(h *History, byHalf map[string][]*Record, pairOfHalf map[string]string,
	halvesOfPair map[string]map[string]bool) *SitesReport {
	rep := &SitesReport{Pairs: len(halvesOfPair), AgreeWithin: h.Agree, AgreedAfter: []float64{},
		Disagreements: []string{}}
	var healed int64
	for _, n := range h.Nemesis {
		end := *n.Start
		if n.End != nil {
			end = *n.End
		}
		if end > healed {
			healed = end
		}
	}
	// Writes end the quiet period too: agreement is about a settled state.
	var lastWrite int64
	for _, recs := range byHalf {
		for _, r := range recs {
			if !r.isRead() && r.Return != nil && *r.Return > lastWrite && !r.infiniteReturn {
				lastWrite = *r.Return
			}
			if !r.isRead() && r.infiniteReturn && *r.Call > lastWrite {
				lastWrite = *r.Call
			}
		}
	}
	if lastWrite > healed {
		healed = lastWrite
	}
	rep.Healed = healed
	bound := healed + int64(h.Agree*1e9)
	pairs := make([]string, 0, len(halvesOfPair))
	for p := range halvesOfPair {
		pairs = append(pairs, p)
	}
	sort.Strings(pairs)
	for _, pair := range pairs {
		halves := []string{}
		for half := range halvesOfPair[pair] {
			halves = append(halves, half)
		}
		sort.Strings(halves)
		// Whether each half exists in the end: its last answered read after healing.
		exists := map[string]bool{}
		var reads []*Record
		for _, half := range halves {
			for _, r := range byHalf[half] {
				if r.F == "get_half" && r.Outcome != "info" && !r.infiniteReturn && *r.Call >= healed {
					reads = append(reads, r)
				}
			}
		}
		sort.Slice(reads, func(i, j int) bool { return *reads[i].Call < *reads[j].Call })
		for _, r := range reads {
			_, half, _ := pairKey(r)
			exists[half] = r.Outcome == "ok"
		}
		want := "Pending"
		if len(halves) == 2 && exists[halves[0]] && exists[halves[1]] {
			want = "Bound"
		}
		agreedFrom := int64(math.MinInt64)
		agreeing := false
		for _, r := range reads {
			rep.ReadsAfterHealing++
			_, half, _ := pairKey(r)
			ok := r.Outcome == "fail" // an absent half agrees with anything the other side says but Bound
			if r.Outcome == "ok" {
				var res netResult
				_ = decodeResult(r.Result, &res)
				ok = res.Phase == want
				if !ok && *r.Call >= bound {
					other := "absent"
					for _, x := range halves {
						if x != half && exists[x] {
							other = "present"
						}
					}
					rep.Disagreements = append(rep.Disagreements, fmt.Sprintf(
						"line %d: %s reads %s %.1fs after healing (the other half is %s): expected %s", r.Line,
						half, res.Phase, float64(*r.Call-healed)/1e9, other, want))
				}
			}
			if ok && !agreeing {
				agreeing, agreedFrom = true, *r.Call
			} else if !ok {
				agreeing = false
			}
		}
		if len(reads) == 0 {
			rep.Disagreements = append(rep.Disagreements, fmt.Sprintf("pair %s: no read after healing", pair))
			continue
		}
		if !agreeing {
			rep.Disagreements = append(rep.Disagreements, fmt.Sprintf("pair %s: the last read after healing "+
				"still disagrees (expected %s)", pair, want))
			continue
		}
		if agreedFrom < healed {
			agreedFrom = healed
		}
		rep.AgreedAfter = append(rep.AgreedAfter, float64(agreedFrom-healed)/1e9)
	}
	sort.Float64s(rep.AgreedAfter)
	return rep
}
