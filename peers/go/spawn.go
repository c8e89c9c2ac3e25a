package main

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// idleActor is one spawned actor: its start-up is to announce itself on the
// shared counter (the last one to start closes allStarted); then it waits on
// its own mailbox until the mailbox is closed. No message is ever sent.
func idleActor(mailbox <-chan int, started *atomic.Int64, n int64,
	allStarted chan<- struct{}, stopped *sync.WaitGroup) {
	defer stopped.Done()
	if started.Add(1) == n {
		close(allStarted)
	}
	for range mailbox {
		// an actor would handle its messages here
	}
}

func runSpawn(o options) bool {
	n := o.actors
	memPerActor := -1.0 // measured around the process's first spawn only
	samples, ok := repetitions(o, 1, func(rep int) ([]float64, bool) {
		var before int64
		if rep == 0 {
			runtime.GC()
			before = rssBytes()
		}

		var started atomic.Int64
		allStarted := make(chan struct{})
		var stopped sync.WaitGroup
		stopped.Add(n)

		// Spawn: an actor is a goroutine together with its mailbox.
		t0 := time.Now()
		mailboxes := make([]chan int, n)
		for i := range mailboxes {
			mailboxes[i] = make(chan int, o.contender.idleCap)
			go idleActor(mailboxes[i], &started, int64(n), allStarted, &stopped)
		}
		<-allStarted
		elapsed := time.Since(t0)

		if rep == 0 {
			runtime.GC()
			after := rssBytes()
			if before >= 0 && after >= 0 {
				memPerActor = float64(after-before) / float64(n)
			}
		}

		// Stop them all and wait until every goroutine has returned.
		for _, mb := range mailboxes {
			close(mb)
		}
		stopped.Wait()

		count := started.Load()
		if count != int64(n) {
			fmt.Fprintf(os.Stderr, "spawn: %d actors started (want %d)\n", count, n)
		}
		return []float64{float64(elapsed.Nanoseconds()) / 1e3 / float64(n)}, count == int64(n)
	})

	ps := params{{"actors", n}}
	desc := "unbuffered chan int"
	if o.contender.idleCap > 0 {
		desc = fmt.Sprintf("chan int buffered %d", o.contender.idleCap)
	}
	notes := fmt.Sprintf("one goroutine per actor blocked on its own %s, GOMAXPROCS=%d",
		desc, runtime.GOMAXPROCS(0))
	emit(o, ps, "spawn_time", "us/actor", samples[0], ok, notes)

	memOK := ok && memPerActor >= 0
	mem := []float64{}
	if memPerActor >= 0 {
		mem = []float64{memPerActor}
	}
	emit(o, ps, "memory", "bytes/actor", mem, memOK,
		notes+"; VmRSS delta around the first spawn, runtime.GC() before each reading")
	return memOK
}
