package main

// What one group's operations name (its networks, its halves, the prefix
// sets its networks take) and the shapes of the answers the model compares.

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
	NS            string    `json:"ns"`
	Network       string    `json:"network"`
	Peering       string    `json:"peering"`
	RemoteNS      string    `json:"remote_ns"`
	RemoteNetwork string    `json:"remote_network"`
	RemoteSite    string    `json:"remote_site"`
	Subnets       []string  `json:"subnets"`
	Routes        []string  `json:"routes"`
	Halves        []netArgs `json:"halves"` // create_peerings: one create_peering's args each
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
	note := func(a netArgs) {
		if a.NS != "" {
			nss[a.NS] = true
		}
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
	}
	for _, r := range recs {
		var a netArgs
		r.args(&a)
		note(a)
		for _, h := range a.Halves {
			note(h)
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
