package main

import (
	"fmt"
	"os"
	"runtime"
	"time"
)

// fanoutMsg is a worker's message: Work(i) when reply is nil, Sum otherwise.
// Both kinds travel through the one mailbox, so a Sum is answered only after
// every Work sent before it (a separate channel chosen by select could
// overtake Works still waiting in a buffer).
type fanoutMsg struct {
	i     uint64
	reply chan<- uint64
}

// squareMod is the arithmetic of one message, as in troupe's fanout:
// (i*i) mod 1,000,003 with wrapping multiplication.
func squareMod(x uint64) uint64 {
	return x * x % 1_000_003
}

// fanoutWorker owns its sum; Work adds to it (wrapping), Sum answers it and
// resets it to zero. It stops when its mailbox is closed.
func fanoutWorker(mailbox <-chan fanoutMsg) {
	var sum uint64
	for msg := range mailbox {
		if msg.reply == nil {
			sum += squareMod(msg.i)
		} else {
			msg.reply <- sum
			sum = 0
		}
	}
}

// fanoutExpected is what worker a of n must hold after messages 0..m-1 went
// round-robin (i to worker i mod n).
func fanoutExpected(n int, m uint64) []uint64 {
	want := make([]uint64, n)
	for i := uint64(0); i < m; i++ {
		want[i%uint64(n)] += squareMod(i)
	}
	return want
}

func runFanout(o options) bool {
	n, m := o.actors, o.messages
	want := fanoutExpected(n, m)

	// The workers are started once, before any repetition, and are not timed
	// (as troupe's fanout spawns its actors once); each repetition's Sum
	// requests leave every sum at zero for the next one.
	mailboxes := make([]chan fanoutMsg, n)
	for a := range mailboxes {
		mailboxes[a] = make(chan fanoutMsg, o.contender.mailboxCap)
		go fanoutWorker(mailboxes[a])
	}
	// The reply channel holds one value so a worker never waits on it; the
	// requests go out one at a time, so one channel serves them all.
	reply := make(chan uint64, 1)

	samples, ok := repetitions(o, 1, func(rep int) ([]float64, bool) {
		// The sender is the main goroutine, not one started for the purpose:
		// Go has no sender outside its scheduler, and this is the plainest.
		t0 := time.Now()
		for i := uint64(0); i < m; i++ {
			mailboxes[i%uint64(n)] <- fanoutMsg{i: i}
		}
		sums := make([]uint64, n)
		for a, mailbox := range mailboxes {
			mailbox <- fanoutMsg{reply: reply}
			sums[a] = <-reply
		}
		elapsed := time.Since(t0)

		good := true
		for a, got := range sums {
			if got != want[a] {
				if good {
					fmt.Fprintf(os.Stderr, "fanout: actor %d holds %d (want %d)\n", a, got, want[a])
				}
				good = false
			}
		}
		return []float64{float64(m) / elapsed.Seconds()}, good
	})
	for _, mailbox := range mailboxes {
		close(mailbox)
	}

	ps := params{{"actors", n}, {"messages", m}}
	notes := fmt.Sprintf("%d worker goroutines, each mailbox %s; the main goroutine sends round-robin "+
		"(Go has no plain thread outside its scheduler), then asks each worker for its sum; GOMAXPROCS=%d",
		n, o.contender.mailboxDesc(), runtime.GOMAXPROCS(0))
	emit(o, ps, "throughput", "msgs/s", samples[0], ok, notes)
	return ok
}
