// lincheck: checks a history of netpeer API calls for linearizability with
// Porcupine, against netpeer's sequential model (netmodel.go), the sweeper
// lease (lease.go) and, across sites, the weaker guarantee of sites.go.
//
//	lincheck check HISTORY.jsonl [-out DIR] [-timeout SECONDS]
//
// Prints one JSON object (the verdict and the figures); writes Porcupine's
// HTML visualisation of every group that is not linearizable into DIR.
// Exit status: 0 linearizable, 1 not, 3 undecided within the timeout,
// 2 bad input (one line on stderr naming the file, the line and the fault).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "check" {
		fail("usage: lincheck check HISTORY.jsonl [-out DIR] [-timeout SECONDS]")
	}
	flags := flag.NewFlagSet("check", flag.ContinueOnError)
	flags.SetOutput(os.Stderr)
	out := flags.String("out", "", "directory for the visualisations of violations (default: next to the history)")
	timeout := flags.Float64("timeout", 120, "seconds the checker may spend on one group")
	var path string
	args := os.Args[2:]
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		path, args = args[0], args[1:]
	}
	if err := flags.Parse(args); err != nil {
		os.Exit(2)
	}
	if path == "" && flags.NArg() == 1 {
		path = flags.Arg(0)
	} else if path == "" || flags.NArg() > 0 {
		fail("usage: lincheck check HISTORY.jsonl [-out DIR] [-timeout SECONDS]")
	}
	if *timeout <= 0 {
		fail(fmt.Sprintf("-timeout: %v is not a positive number of seconds", *timeout))
	}
	if *out == "" {
		*out = strings.TrimSuffix(path, filepath.Ext(path)) + "-violations"
	}
	h, err := ReadHistory(path)
	if err != nil {
		fail(err.Error())
	}
	summary, err := check(h, *out, time.Duration(*timeout*float64(time.Second)))
	if err != nil {
		fail(err.Error())
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	_ = enc.Encode(summary)
	switch summary.Verdict {
	case "linearizable":
		os.Exit(0)
	case "not linearizable":
		os.Exit(1)
	default:
		os.Exit(3)
	}
}

func fail(msg string) {
	fmt.Fprintf(os.Stderr, "lincheck: %s\n", msg)
	os.Exit(2)
}

// Violation names where a group stops being linearizable.
type Violation struct {
	Group         string `json:"group"`
	Operation     string `json:"operation"` // as the visualisation describes it
	Line          int    `json:"line"`      // of the history file
	Process       int    `json:"process"`
	Node          string `json:"node,omitempty"`
	Linearized    int    `json:"linearized"` // operations of the longest linearizable prefix
	Operations    int    `json:"operations"`
	Visualization string `json:"visualization"`
	Model         string `json:"model"`
}

// Summary is what the checker prints.
type Summary struct {
	Verdict          string         `json:"verdict"`
	History          string         `json:"history"`
	Operations       int            `json:"operations"`
	Checked          int            `json:"checked"`
	ByOutcome        map[string]int `json:"by_outcome"`
	ByOperation      map[string]int `json:"by_operation"`
	Groups           int            `json:"groups"`
	LargestGroup     int            `json:"largest_group"`
	InDoubtWrites    int            `json:"in_doubt_writes"`
	DroppedReads     int            `json:"dropped_reads"`
	UnexpectedErrors []string       `json:"unexpected_errors"`
	Nemesis          map[string]int `json:"nemesis"`
	Undecided        []string       `json:"undecided"`
	Violations       []Violation    `json:"violations"`
	Sites            *SitesReport   `json:"sites,omitempty"`
	CheckerSeconds   float64        `json:"checker_seconds"`
}

type partition struct {
	name  string
	model porcupine.Model
	ops   []porcupine.Operation
	recs  []*Record
}

func check(h *History, outDir string, timeout time.Duration) (*Summary, error) {
	began := time.Now()
	s := &Summary{History: h.Path, Operations: len(h.Ops), ByOutcome: map[string]int{}, ByOperation: map[string]int{},
		Nemesis: map[string]int{}, UnexpectedErrors: []string{}, Undecided: []string{}, Violations: []Violation{}}
	for _, n := range h.Nemesis {
		s.Nemesis[n.Kind]++
	}
	groups := map[string][]*Record{}
	var lease, sites []*Record
	for _, r := range h.Ops {
		s.ByOutcome[r.Outcome]++
		s.ByOperation[r.F]++
		if r.unexpectedError {
			s.UnexpectedErrors = append(s.UnexpectedErrors, fmt.Sprintf("line %d: %s %s: %s", r.Line, r.F, r.Error,
				r.Message))
		}
		switch {
		case r.F == "status":
			lease = append(lease, r)
		case strings.HasSuffix(r.F, "_half"):
			sites = append(sites, r)
		default:
			groups[r.Group] = append(groups[r.Group], r)
		}
	}
	if len(lease) > 0 && h.Lease <= 0 {
		return nil, inputError{fmt.Sprintf("%s: status operations need the lease (a meta line with lease_s)", h.Path)}
	}
	var parts []*partition
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	sort.Strings(names)
	for _, g := range names {
		p, err := netPartition(g, groups[g], s)
		if err != nil {
			return nil, inputError{fmt.Sprintf("%s%s", h.Path, err.Error())}
		}
		parts = append(parts, p)
	}
	if len(lease) > 0 {
		parts = append(parts, leasePartition(lease, h.Lease, s))
	}
	if len(sites) > 0 {
		sp, report, err := sitesPartitions(h, sites, s)
		if err != nil {
			return nil, err
		}
		parts = append(parts, sp...)
		s.Sites = report
	}
	s.Groups = len(parts)
	for _, p := range parts {
		s.Checked += len(p.ops)
		if len(p.ops) > s.LargestGroup {
			s.LargestGroup = len(p.ops)
		}
	}

	results := make([]porcupine.CheckResult, len(parts))
	var wg sync.WaitGroup
	work := make(chan int)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				results[i] = porcupine.CheckOperationsTimeout(parts[i].model, parts[i].ops, timeout)
			}
		}()
	}
	for i := range parts {
		work <- i
	}
	close(work)
	wg.Wait()

	for i, p := range parts {
		switch results[i] {
		case porcupine.Unknown:
			s.Undecided = append(s.Undecided, p.name)
		case porcupine.Illegal:
			v, err := explain(p, h, outDir, timeout)
			if err != nil {
				return nil, err
			}
			s.Violations = append(s.Violations, v)
		}
	}
	switch {
	case len(s.Violations) > 0 || (s.Sites != nil && len(s.Sites.Disagreements) > 0):
		s.Verdict = "not linearizable"
	case len(s.Undecided) > 0:
		s.Verdict = "undecided"
	default:
		s.Verdict = "linearizable"
	}
	s.CheckerSeconds = time.Since(began).Seconds()
	return s, nil
}

// dense gives each process of a partition a small client number (the
// visualisation draws one row per client).
type dense map[int]int

func (d dense) id(process int) int {
	if v, ok := d[process]; ok {
		return v
	}
	d[process] = len(d)
	return d[process]
}

func netPartition(group string, recs []*Record, s *Summary) (*partition, error) {
	u, err := newUniverse(group, recs)
	if err != nil {
		return nil, err
	}
	p := &partition{name: group}
	clients := dense{}
	for _, r := range recs {
		if r.isRead() && (r.infiniteReturn || r.Error == "UNAVAILABLE") {
			s.DroppedReads++ // an unanswered read tells nothing
			continue
		}
		if r.infiniteReturn {
			s.InDoubtWrites++
		}
		in, out, err := netOperation(u, r, 0)
		if err != nil {
			return nil, err
		}
		p.ops = append(p.ops, porcupine.Operation{ClientId: clients.id(*r.Process), Input: in, Output: out,
			Call: *r.Call, Return: r.returnTime(), Metadata: r})
		p.recs = append(p.recs, r)
	}
	p.model = porcupine.Model{
		Init:              func() interface{} { return netModelState{u: u} },
		Step:              netStep,
		Equal:             func(a, b interface{}) bool { return a.(netModelState).key == b.(netModelState).key },
		Hash:              func(a interface{}) uint64 { return fnv(a.(netModelState).key) },
		DescribeOperation: describeNetOp,
		DescribeState:     func(st interface{}) string { return st.(netModelState).String() },
		DescribeOperationMetadata: func(m interface{}) string {
			return describeRecord(m.(*Record))
		},
	}
	return p, nil
}

func leasePartition(recs []*Record, ttl float64, s *Summary) *partition {
	p := &partition{name: "lease"}
	clients := dense{}
	for _, r := range recs {
		if r.Outcome != "ok" {
			s.DroppedReads++
			continue
		}
		var res struct {
			Leading bool `json:"leading"`
		}
		_ = json.Unmarshal(r.Result, &res)
		in := leaseInput{rec: r, node: r.Node, leading: res.Leading, call: *r.Call, ret: *r.Return}
		p.ops = append(p.ops, porcupine.Operation{ClientId: clients.id(*r.Process), Input: in, Output: nil,
			Call: *r.Call, Return: *r.Return, Metadata: r})
		p.recs = append(p.recs, r)
	}
	// 2% of slack for the clocks' rates (PostgreSQL's clock times the lease).
	gap := int64(ttl * 0.98 * float64(time.Second))
	p.model = porcupine.Model{
		Init:              func() interface{} { return leaseState{ttl: gap} },
		Step:              leaseStep,
		DescribeOperation: describeLeaseOp,
		DescribeState:     describeLeaseState,
		DescribeOperationMetadata: func(m interface{}) string {
			return describeRecord(m.(*Record))
		},
	}
	return p
}

func describeRecord(r *Record) string {
	parts := []string{fmt.Sprintf("history line %d", r.Line), fmt.Sprintf("process %d", *r.Process)}
	if r.Node != "" {
		parts = append(parts, "replica "+r.Node)
	}
	if r.Site != "" {
		parts = append(parts, "site "+r.Site)
	}
	if r.Message != "" {
		parts = append(parts, r.Error+": "+r.Message)
	}
	return strings.Join(parts, ", ")
}

func fnv(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// explain checks an illegal partition again, keeping what Porcupine found,
// writes its visualisation and names the operation that cannot be placed:
// of the operations outside the longest linearizable prefix, the one that
// returned first (the search failed because nothing could be linearized
// before it returned).
func explain(p *partition, h *History, outDir string, timeout time.Duration) (Violation, error) {
	_, info := porcupine.CheckOperationsVerbose(p.model, p.ops, timeout)
	var annotations []porcupine.Annotation
	for _, n := range h.Nemesis {
		end := *n.Start
		if n.End != nil {
			end = *n.End
		}
		annotations = append(annotations, porcupine.Annotation{Tag: "fault", Start: *n.Start, End: end,
			Description: n.Kind + " " + n.Target, Details: n.Detail, BackgroundColor: "#fde2c8"})
	}
	info.AddAnnotations(annotations)
	longest := []int{}
	for _, l := range info.PartialLinearizations() {
		for _, candidate := range l {
			if len(candidate) > len(longest) {
				longest = candidate
			}
		}
	}
	in := map[int]bool{}
	for _, id := range longest {
		in[id] = true
	}
	culprit := -1
	for i, op := range p.ops {
		if !in[i] && (culprit < 0 || op.Return < p.ops[culprit].Return) {
			culprit = i
		}
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return Violation{}, inputError{fmt.Sprintf("%s: cannot be made (%v)", outDir, errUnwrapped(err))}
	}
	file := filepath.Join(outDir, safeName(p.name)+".html")
	if err := porcupine.VisualizePath(p.model, info, file); err != nil {
		return Violation{}, inputError{fmt.Sprintf("%s: cannot be written (%v)", file, err)}
	}
	v := Violation{Group: p.name, Linearized: len(longest), Operations: len(p.ops), Visualization: file}
	if culprit >= 0 {
		op := p.ops[culprit]
		r := p.recs[culprit]
		v.Operation = p.model.DescribeOperation(op.Input, op.Output)
		v.Line, v.Process, v.Node = r.Line, *r.Process, r.Node
		if r.Site != "" {
			v.Node = r.Site
		}
	}
	if len(longest) > 0 {
		state := p.model.Init()
		for _, id := range longest {
			_, state = p.model.Step(state, p.ops[id].Input, p.ops[id].Output)
		}
		v.Model = p.model.DescribeState(state)
	}
	return v, nil
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' || r == ':' {
			return '_'
		}
		return r
	}, s)
}
