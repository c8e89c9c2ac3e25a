package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
)

// param is one named scenario parameter; params keeps them in command-line
// order in the JSON output (a Go map would be printed sorted by key).
type param struct {
	key   string
	value interface{}
}

type params []param

func (ps params) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(p.key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(p.value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// machine describes where the run happened.
type machine struct {
	CPU     string `json:"cpu"`
	Cores   int    `json:"cores"`
	OS      string `json:"os"`
	Runtime string `json:"runtime"`
}

// result is one line of output, with fields in the order of PROTOCOL.md.
type result struct {
	Scenario  string    `json:"scenario"`
	Metric    string    `json:"metric"`
	Contender string    `json:"contender"`
	Params    params    `json:"params"`
	Unit      string    `json:"unit"`
	Median    float64   `json:"median"`
	Min       float64   `json:"min"`
	Max       float64   `json:"max"`
	Samples   []float64 `json:"samples"`
	Validated bool      `json:"validated"`
	Notes     string    `json:"notes"`
	Machine   machine   `json:"machine"`
}

// emit prints one result line on stdout, computing median, min and max from
// the samples.
func emit(o options, ps params, metric, unit string, samples []float64, validated bool, notes string) {
	sorted := append([]float64(nil), samples...)
	sort.Float64s(sorted)
	r := result{
		Scenario:  o.scenario,
		Metric:    metric,
		Contender: o.contender.name,
		Params:    ps,
		Unit:      unit,
		Samples:   samples,
		Validated: validated,
		Notes:     notes,
		Machine:   thisMachine(),
	}
	if n := len(sorted); n > 0 {
		r.Min, r.Max = sorted[0], sorted[n-1]
		if n%2 == 1 {
			r.Median = sorted[n/2]
		} else {
			r.Median = (sorted[n/2-1] + sorted[n/2]) / 2
		}
	}
	line, err := json.Marshal(r)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: cannot encode result: %v\n", err)
		os.Exit(1)
	}
	os.Stdout.Write(append(line, '\n'))
}

// thisMachine collects the machine description from /proc and /etc.
func thisMachine() machine {
	m := machine{
		CPU:     "unknown",
		Cores:   runtime.NumCPU(),
		OS:      runtime.GOOS + "/" + runtime.GOARCH,
		Runtime: runtime.Version(),
	}
	if v, ok := fieldOf("/proc/cpuinfo", "model name", ':'); ok {
		m.CPU = v
	}
	if v, ok := fieldOf("/etc/os-release", "PRETTY_NAME", '='); ok {
		m.OS = strings.Trim(v, `"`) + ", " + m.OS
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.OS += ", kernel " + strings.TrimSpace(string(b))
	}
	return m
}

// fieldOf returns the value of the first "key<sep>value" line of a file.
func fieldOf(path, key string, sep byte) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		i := strings.IndexByte(line, sep)
		if i >= 0 && strings.TrimSpace(line[:i]) == key {
			return strings.TrimSpace(line[i+1:]), true
		}
	}
	return "", false
}

// rssBytes returns the resident set size of this process (VmRSS in
// /proc/self/status), or -1 if it cannot be read.
func rssBytes() int64 {
	v, ok := fieldOf("/proc/self/status", "VmRSS", ':')
	if !ok {
		return -1
	}
	kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 10, 64)
	if err != nil {
		return -1
	}
	return kb * 1024
}
