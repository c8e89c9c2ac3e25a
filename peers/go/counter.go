package main

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
)

// counterMsg is the counting actor's message: Add(n) when reply is nil,
// GetAndReset otherwise. Both kinds travel through the one mailbox, so a
// GetAndReset is handled only after every Add sent before it (a separate
// channel chosen by select could overtake Adds still waiting in a buffer).
type counterMsg struct {
	add   int64
	reply chan<- int64
}

// countingActor owns the integer; it stops when its mailbox is closed.
func countingActor(mailbox <-chan counterMsg) {
	var state int64
	for msg := range mailbox {
		if msg.reply == nil {
			state += msg.add
		} else {
			msg.reply <- state
			state = 0
		}
	}
}

// getAndReset is the request-reply: it sends GetAndReset and waits for the
// answer. The reply channel holds one value so the actor never waits on it.
func getAndReset(mailbox chan<- counterMsg) int64 {
	reply := make(chan int64, 1)
	mailbox <- counterMsg{reply: reply}
	return <-reply
}

func runCounter(o options) bool {
	p, k := o.producers, o.perProducer
	want := int64(p) * int64(k) * 100
	samples, ok := repetitions(o, 1, func(rep int) ([]float64, bool) {
		// A fresh actor for every repetition; creating it is not timed.
		mailbox := make(chan counterMsg, o.contender.mailboxCap)
		go countingActor(mailbox)

		t0 := time.Now()
		var producers sync.WaitGroup
		producers.Add(p)
		for i := 0; i < p; i++ {
			go func() {
				defer producers.Done()
				for j := 0; j < k; j++ {
					mailbox <- counterMsg{add: 100}
				}
			}()
		}
		producers.Wait() // the request goes out only after every producer is done
		got := getAndReset(mailbox)
		elapsed := time.Since(t0)

		close(mailbox)
		if got != want {
			fmt.Fprintf(os.Stderr, "counter: GetAndReset returned %d (want %d)\n", got, want)
		}
		return []float64{float64(p) * float64(k) / elapsed.Seconds()}, got == want
	})

	ps := params{{"producers", p}, {"per_producer", k}}
	notes := fmt.Sprintf("one counting goroutine whose mailbox is %s, %d producer goroutines, GOMAXPROCS=%d",
		o.contender.mailboxDesc(), p, runtime.GOMAXPROCS(0))
	emit(o, ps, "throughput", "msgs/s", samples[0], ok, notes)
	return ok
}
