// Command troupe-peer-go is the Go peer of troupe's benchmark comparison.
//
// It implements the five scenarios of peers/PROTOCOL.md (ring, spawn, counter,
// chain, fanout) with plain goroutines and channels, the way the Go documentation
// recommends for concurrent message passing, and prints one JSON object per
// (scenario, metric) on stdout. Everything else (progress, errors) goes to
// stderr.
//
// Usage:
//
//	troupe-peer-go ring    --actors N --rounds M            [--repeat R] [--warmup W] [--contender NAME]
//	troupe-peer-go spawn   --actors N                       [--repeat R] [--warmup W] [--contender NAME]
//	troupe-peer-go counter --producers P --per-producer K   [--repeat R] [--warmup W] [--contender NAME]
//	troupe-peer-go chain   --length N --mode actors|threads [--repeat R] [--warmup W] [--contender NAME]
//	troupe-peer-go fanout  --actors N --messages M          [--repeat R] [--warmup W] [--contender NAME]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
)

// contender is one variant this program can run. The two variants differ only
// in the capacity of the channels that serve as mailboxes.
type contender struct {
	name string
	// mailboxCap is the capacity of the busy mailboxes: ring nodes, the
	// counting actor, chain stages and fanout workers. 0 means unbuffered.
	mailboxCap int
	// idleCap is the capacity of the mailboxes of the spawn scenario's idle
	// goroutines. It is kept small for the buffered variant because Go
	// allocates a channel's whole buffer up front: a million mailboxes of
	// 1024 ints would be 8 GB of empty buffers.
	idleCap int
	// chanDesc is the short description of the channels used in notes.
	chanDesc string
}

// mailboxDesc describes one busy mailbox, for notes.
func (c contender) mailboxDesc() string {
	if c.mailboxCap == 0 {
		return "an unbuffered channel"
	}
	return fmt.Sprintf("a channel buffered %d", c.mailboxCap)
}

var contenders = []contender{
	{name: "go-chan", mailboxCap: 0, idleCap: 0, chanDesc: "unbuffered channels"},
	{name: "go-chan-buffered", mailboxCap: 1024, idleCap: 16, chanDesc: "channels buffered 1024"},
}

// options holds the parsed command line of one invocation.
type options struct {
	scenario  string
	contender contender
	repeat    int
	warmup    int

	actors      int    // ring, spawn, fanout
	rounds      int    // ring
	messages    uint64 // fanout
	producers   int    // counter
	perProducer int    // counter
	length      int    // chain
	mode        string // chain (accepted; goroutines are Go's only mode)
}

func usage() {
	fmt.Fprint(os.Stderr, `usage:
  troupe-peer-go ring    --actors N --rounds M            [--repeat R] [--warmup W] [--contender NAME]
  troupe-peer-go spawn   --actors N                       [--repeat R] [--warmup W] [--contender NAME]
  troupe-peer-go counter --producers P --per-producer K   [--repeat R] [--warmup W] [--contender NAME]
  troupe-peer-go chain   --length N --mode actors|threads [--repeat R] [--warmup W] [--contender NAME]
  troupe-peer-go fanout  --actors N --messages M          [--repeat R] [--warmup W] [--contender NAME]
contenders: go-chan (default), go-chan-buffered
`)
}

// fail reports a usage error and exits with status 2.
func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "error: "+format+"\n", args...)
	os.Exit(2)
}

func parseArgs(args []string) options {
	if len(args) < 1 || args[0] == "-h" || args[0] == "--help" {
		usage()
		os.Exit(2)
	}
	o := options{scenario: args[0]}

	fs := flag.NewFlagSet(o.scenario, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported below, once
	name := fs.String("contender", "go-chan", "variant to run")
	fs.IntVar(&o.repeat, "repeat", 1, "measured repetitions")
	fs.IntVar(&o.warmup, "warmup", 0, "unmeasured repetitions run first")
	switch o.scenario {
	case "ring":
		fs.IntVar(&o.actors, "actors", 0, "nodes in the ring")
		fs.IntVar(&o.rounds, "rounds", 0, "rounds of the token")
	case "spawn":
		fs.IntVar(&o.actors, "actors", 0, "goroutines to spawn")
	case "counter":
		// One producer per core by default, as in the seed.
		fs.IntVar(&o.producers, "producers", runtime.NumCPU(), "producer goroutines")
		fs.IntVar(&o.perProducer, "per-producer", 0, "messages sent by each producer")
	case "chain":
		fs.IntVar(&o.length, "length", 0, "stages in the chain")
		fs.StringVar(&o.mode, "mode", "actors", "actors|threads (both run goroutines)")
	case "fanout":
		fs.IntVar(&o.actors, "actors", 0, "worker goroutines")
		fs.Uint64Var(&o.messages, "messages", 0, "messages in all, sent round-robin")
	default:
		usage()
		fail("unknown scenario %q", o.scenario)
	}
	if err := fs.Parse(args[1:]); err != nil {
		fail("%s: %v", o.scenario, err)
	}
	if fs.NArg() > 0 {
		fail("%s: unexpected argument %q", o.scenario, fs.Arg(0))
	}

	found := false
	for _, c := range contenders {
		if c.name == *name {
			o.contender, found = c, true
		}
	}
	if !found {
		fail("unknown contender %q (known: go-chan, go-chan-buffered)", *name)
	}
	if o.repeat < 1 || o.warmup < 0 {
		fail("--repeat must be >= 1 and --warmup >= 0")
	}
	switch o.scenario {
	case "ring":
		// The origin must not be its own neighbour: with an unbuffered
		// channel a node sending to itself would block forever.
		if o.actors < 2 || o.rounds < 1 {
			fail("ring needs --actors >= 2 and --rounds >= 1")
		}
	case "spawn":
		if o.actors < 1 {
			fail("spawn needs --actors >= 1")
		}
	case "counter":
		if o.producers < 1 || o.perProducer < 1 {
			fail("counter needs --producers >= 1 and --per-producer >= 1")
		}
	case "chain":
		if o.length < 1 {
			fail("chain needs --length >= 1")
		}
		if o.mode != "actors" && o.mode != "threads" {
			fail("chain --mode must be actors or threads")
		}
	case "fanout":
		if o.actors < 1 || o.messages < 1 {
			fail("fanout needs --actors >= 1 and --messages >= 1")
		}
	}
	return o
}

func main() {
	o := parseArgs(os.Args[1:])
	var ok bool
	switch o.scenario {
	case "ring":
		ok = runRing(o)
	case "spawn":
		ok = runSpawn(o)
	case "counter":
		ok = runCounter(o)
	case "chain":
		ok = runChain(o)
	case "fanout":
		ok = runFanout(o)
	}
	if !ok {
		fmt.Fprintf(os.Stderr, "%s (%s): validation FAILED\n", o.scenario, o.contender.name)
		os.Exit(1)
	}
}

// repetitions runs once() o.warmup times unmeasured, then o.repeat times
// measured, and returns the measured samples (one slice per metric, in the
// order once() returns them) and whether every repetition passed its check.
func repetitions(o options, metrics int, once func(rep int) ([]float64, bool)) ([][]float64, bool) {
	samples := make([][]float64, metrics)
	allOK := true
	total := o.warmup + o.repeat
	for rep := 0; rep < total; rep++ {
		values, ok := once(rep)
		measured := rep >= o.warmup
		kind := "warm-up"
		if measured {
			kind = "measured"
		}
		fmt.Fprintf(os.Stderr, "%s %s: repetition %d/%d (%s) %v validated=%v\n",
			o.scenario, o.contender.name, rep+1, total, kind, values, ok)
		allOK = allOK && ok
		if measured {
			for i, v := range values {
				samples[i] = append(samples[i], v)
			}
		}
	}
	return samples, allOK
}
