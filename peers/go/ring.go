package main

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
)

// token is the message that travels around the ring.
type token struct {
	origin int // the node that started the token
	value  int // rounds completed so far
}

// ringOutcome is what the origin node reports once the token has done all
// its rounds.
type ringOutcome struct {
	begin, end time.Time // first send, and the origin seeing the last round
	finalValue int
}

// ringNode is one actor of the ring: a goroutine that owns its inbox and
// knows the next node's inbox. Node 0 is the origin: when start is closed it
// sends the first token to its neighbour, and every time the token comes back
// it counts one round; after `rounds` rounds it stops the ring by closing its
// neighbour's inbox, and each node passes the close on to the next.
func ringNode(id, rounds int, in <-chan token, next chan<- token,
	start <-chan struct{}, outcome *ringOutcome, done chan<- struct{},
	counts []int, wg *sync.WaitGroup) {
	defer wg.Done()
	defer close(next) // stopping: tell the next node there is nothing more

	received := 0
	defer func() { counts[id] = received }()

	if id == 0 {
		<-start
		outcome.begin = time.Now()
		next <- token{origin: 0, value: 0}
	}
	for t := range in {
		received++
		if t.origin == id {
			t.value++
			if t.value == rounds {
				outcome.end = time.Now()
				outcome.finalValue = t.value
				close(done)
				return
			}
		}
		next <- t
	}
}

func runRing(o options) bool {
	n, m := o.actors, o.rounds
	samples, ok := repetitions(o, 2, func(rep int) ([]float64, bool) {
		// Construct: make the N inboxes and start the N goroutines, each
		// given its own inbox and the next node's.
		t0 := time.Now()
		inboxes := make([]chan token, n)
		for i := range inboxes {
			inboxes[i] = make(chan token, o.contender.mailboxCap)
		}
		start := make(chan struct{})
		done := make(chan struct{})
		counts := make([]int, n)
		var outcome ringOutcome
		var wg sync.WaitGroup
		wg.Add(n)
		for i := 0; i < n; i++ {
			go ringNode(i, m, inboxes[i], inboxes[(i+1)%n], start, &outcome, done, counts, &wg)
		}
		construct := time.Since(t0)

		// Run: the origin takes its own timestamps around the rounds.
		close(start)
		<-done
		wg.Wait() // every node has stopped and stored its count

		total := 0
		for _, c := range counts {
			total += c
		}
		valid := total == n*m && outcome.finalValue == m
		if !valid {
			fmt.Fprintf(os.Stderr, "ring: %d tokens received (want %d), final value %d (want %d)\n",
				total, n*m, outcome.finalValue, m)
		}
		elapsed := outcome.end.Sub(outcome.begin).Seconds()
		return []float64{
			float64(construct.Nanoseconds()) / 1e6,
			float64(n) * float64(m) / elapsed,
		}, valid
	})

	ps := params{{"actors", n}, {"rounds", m}}
	notes := fmt.Sprintf("%s, one goroutine per node, GOMAXPROCS=%d",
		o.contender.chanDesc, runtime.GOMAXPROCS(0))
	emit(o, ps, "construct", "ms", samples[0], ok, notes)
	emit(o, ps, "throughput", "msgs/s", samples[1], ok, notes)
	return ok
}
