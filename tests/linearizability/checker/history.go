package main

// Reading a history: one JSON object per line, written by
// tests/linearizability/history.py. Anything that is not a valid history is
// refused with one line naming the file, the line and what is wrong.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
)

// Record is one line of a history.
type Record struct {
	Type string `json:"type"` // op, nemesis, meta

	// op
	Process *int            `json:"process"`
	F       string          `json:"f"`
	Group   string          `json:"group"`
	Node    string          `json:"node"`
	Site    string          `json:"site"`
	Args    json.RawMessage `json:"args"`
	Call    *int64          `json:"call"`
	Return  *int64          `json:"return"`
	Outcome string          `json:"outcome"` // ok, fail, info
	Result  json.RawMessage `json:"result"`
	Error   string          `json:"error"`
	Message string          `json:"message"`

	// nemesis
	Kind   string `json:"kind"`
	Target string `json:"target"`
	Start  *int64 `json:"start"`
	End    *int64 `json:"end"`
	Detail string `json:"detail"`

	// meta: the run's settings (lease, sites' bound), free-form otherwise
	LeaseSeconds    float64 `json:"lease_s"`
	AgreeSeconds    float64 `json:"agree_within_s"`
	Stack           string  `json:"stack"`
	Line            int     `json:"-"`
	raw             []byte
	infiniteReturn  bool
	unexpectedError bool
}

// History is a parsed history file.
type History struct {
	Path    string
	Ops     []*Record
	Nemesis []*Record
	Meta    map[string]interface{}
	Lease   float64 // seconds; 0 when the run had no lease
	Agree   float64 // seconds: the bound on cross-site agreement after healing
}

// Error codes a call can end with that say it changed nothing and that the
// model knows: anything else a server answers is an unexpected error.
// UNAVAILABLE is recorded as a failure only when netpeerd itself answered
// it (or the call never left): netpeer promises that such a call changed
// nothing (docs/reliability.md); any other UNAVAILABLE is recorded "info".
var modelledCodes = map[string]bool{"NOT_FOUND": true, "ALREADY_EXISTS": true, "FAILED_PRECONDITION": true,
	"UNAVAILABLE": true}

type inputError struct{ msg string }

func (e inputError) Error() string { return e.msg }

func badLine(path string, line int, format string, args ...interface{}) error {
	return inputError{fmt.Sprintf("%s:%d: %s", path, line, fmt.Sprintf(format, args...))}
}

// ReadHistory parses and checks a history file.
func ReadHistory(path string) (*History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, inputError{fmt.Sprintf("%s: cannot be read (%v)", path, errUnwrapped(err))}
	}
	defer f.Close()
	h := &History{Path: path, Meta: map[string]interface{}{}}
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 64<<20)
	line := 0
	for scanner.Scan() {
		line++
		text := bytes.TrimSpace(scanner.Bytes())
		if len(text) == 0 {
			continue
		}
		var r Record
		dec := json.NewDecoder(bytes.NewReader(text))
		if err := dec.Decode(&r); err != nil {
			return nil, badLine(path, line, "not a JSON object (%v)", err)
		}
		if dec.More() {
			return nil, badLine(path, line, "more than one JSON value on the line")
		}
		r.Line = line
		r.raw = append([]byte(nil), text...)
		switch r.Type {
		case "op":
			if err := checkOp(path, &r); err != nil {
				return nil, err
			}
			h.Ops = append(h.Ops, &r)
		case "nemesis":
			if r.Kind == "" || r.Start == nil {
				return nil, badLine(path, line, "a nemesis line needs kind and start")
			}
			if r.End != nil && *r.End < *r.Start {
				return nil, badLine(path, line, "nemesis %s ends (%d) before it starts (%d)", r.Kind, *r.End, *r.Start)
			}
			h.Nemesis = append(h.Nemesis, &r)
		case "meta":
			var m map[string]interface{}
			_ = json.Unmarshal(text, &m)
			for k, v := range m {
				h.Meta[k] = v
			}
			if r.LeaseSeconds < 0 || r.AgreeSeconds < 0 {
				return nil, badLine(path, line, "lease_s and agree_within_s must not be negative")
			}
			if r.LeaseSeconds > 0 {
				h.Lease = r.LeaseSeconds
			}
			if r.AgreeSeconds > 0 {
				h.Agree = r.AgreeSeconds
			}
		case "":
			return nil, badLine(path, line, "no \"type\" (op, nemesis or meta)")
		default:
			return nil, badLine(path, line, "type %q is not op, nemesis or meta", r.Type)
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, inputError{fmt.Sprintf("%s:%d: cannot be read (%v)", path, line+1, err)}
	}
	if len(h.Ops) == 0 {
		return nil, inputError{fmt.Sprintf("%s: holds no operation (type \"op\")", path)}
	}
	sort.SliceStable(h.Ops, func(i, j int) bool { return *h.Ops[i].Call < *h.Ops[j].Call })
	return h, nil
}

func errUnwrapped(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

var knownOps = map[string][]string{
	"create_network":  {"ns", "network", "subnets"},
	"update_network":  {"ns", "network", "subnets"},
	"delete_network":  {"ns", "network"},
	"create_peering":  {"ns", "network", "peering", "remote_ns", "remote_network"},
	"delete_peering":  {"ns", "network", "peering"},
	"get_peering":     {"ns", "network", "peering"},
	"list_networks":   {"ns"},
	"create_peerings": {"halves"},
	"unpin_peering":   {"ns", "network", "peering"},
	"status":          {},
	// across sites: a half of this site towards the other one
	"create_half": {"ns", "network", "peering", "remote_site", "remote_ns", "remote_network"},
	"delete_half": {"ns", "network", "peering"},
	"get_half":    {"ns", "network", "peering"},
}

func checkOp(path string, r *Record) error {
	need, ok := knownOps[r.F]
	if !ok {
		return badLine(path, r.Line, "unknown operation f=%q", r.F)
	}
	if r.Process == nil || *r.Process < 0 {
		return badLine(path, r.Line, "%s: process must be a number >= 0", r.F)
	}
	if r.Call == nil {
		return badLine(path, r.Line, "%s: no call time", r.F)
	}
	switch r.Outcome {
	case "ok", "fail":
		if r.Return == nil {
			return badLine(path, r.Line, "%s: outcome %s needs a return time", r.F, r.Outcome)
		}
	case "info":
	default:
		return badLine(path, r.Line, "%s: outcome %q is not ok, fail or info", r.F, r.Outcome)
	}
	if r.Return != nil && *r.Return < *r.Call {
		return badLine(path, r.Line, "%s: returns (%d) before it is called (%d)", r.F, *r.Return, *r.Call)
	}
	if r.Outcome == "fail" && r.Error == "" {
		return badLine(path, r.Line, "%s: outcome fail needs an error code", r.F)
	}
	if r.F == "status" {
		if r.Node == "" {
			return badLine(path, r.Line, "status: needs node (the replica asked)")
		}
	} else if r.Group == "" {
		return badLine(path, r.Line, "%s: needs group (the key space it works on)", r.F)
	}
	var args map[string]interface{}
	if len(r.Args) > 0 {
		if err := json.Unmarshal(r.Args, &args); err != nil {
			return badLine(path, r.Line, "%s: args is not a JSON object", r.F)
		}
	}
	for _, field := range need {
		v, present := args[field]
		if !present {
			return badLine(path, r.Line, "%s: args.%s is missing", r.F, field)
		}
		if field == "subnets" {
			if _, isList := v.([]interface{}); !isList {
				return badLine(path, r.Line, "%s: args.subnets must be a list", r.F)
			}
		} else if field == "halves" {
			if err := checkHalves(path, r, v); err != nil {
				return err
			}
		} else if s, isString := v.(string); !isString || s == "" {
			return badLine(path, r.Line, "%s: args.%s must be a non-empty string", r.F, field)
		}
	}
	if r.Outcome == "ok" && r.F != "delete_network" && r.F != "delete_peering" && r.F != "delete_half" &&
		(len(r.Result) == 0 || string(r.Result) == "null") {
		return badLine(path, r.Line, "%s: outcome ok needs a result", r.F)
	}
	// A write whose outcome is unknown may take effect at any time after
	// its call, even after its caller gave up (a paused replica wakes up).
	if r.Outcome == "fail" && !modelledCodes[r.Error] {
		r.unexpectedError = true
	}
	if r.Outcome == "info" || r.unexpectedError {
		r.infiniteReturn = true
	}
	return nil
}

// returnTime is the end of the operation's interval for the checker.
func (r *Record) returnTime() int64 {
	if r.infiniteReturn {
		return math.MaxInt64
	}
	return *r.Return
}

// isRead says whether an operation changes nothing.
func (r *Record) isRead() bool {
	switch r.F {
	case "get_peering", "list_networks", "status", "get_half":
		return true
	}
	return false
}

func (r *Record) args(into interface{}) {
	_ = json.Unmarshal(r.Args, into)
}

// decodeResult reads a call's answer.
func decodeResult(raw json.RawMessage, into interface{}) error {
	if len(raw) == 0 || string(raw) == "null" {
		return fmt.Errorf("missing")
	}
	return json.Unmarshal(raw, into)
}

// checkHalves: create_peerings' args.halves is a non-empty list of
// create_peering's args.
func checkHalves(path string, r *Record, v interface{}) error {
	list, isList := v.([]interface{})
	if !isList || len(list) == 0 {
		return badLine(path, r.Line, "%s: args.halves must be a non-empty list", r.F)
	}
	for i, item := range list {
		half, isObject := item.(map[string]interface{})
		if !isObject {
			return badLine(path, r.Line, "%s: args.halves[%d] is not an object", r.F, i)
		}
		for _, field := range knownOps["create_peering"] {
			if s, isString := half[field].(string); !isString || s == "" {
				return badLine(path, r.Line, "%s: args.halves[%d].%s must be a non-empty string", r.F, i, field)
			}
		}
	}
	return nil
}
