package main

import (
	"fmt"
	"os"
	"runtime"
	"time"
)

// chainStage forwards every message from its inbox to the next stage, and
// closes the next stage's inbox once its own is closed and drained.
func chainStage(in <-chan int, next chan<- int) {
	for v := range in {
		next <- v
	}
	close(next)
}

// sinkResult is what the last stage reports.
type sinkResult struct {
	count int
	sum   int64
	last  time.Time // when the n-th message arrived
}

// chainSink is the last stage: it counts and sums what arrives, notes the
// time the n-th message arrived, and keeps reading until its inbox is closed
// so that a surplus message would be seen by the check.
func chainSink(in <-chan int, n int, result chan<- sinkResult) {
	var r sinkResult
	for v := range in {
		r.count++
		r.sum += int64(v)
		if r.count == n {
			r.last = time.Now()
		}
	}
	result <- r
}

func runChain(o options) bool {
	n := o.length
	want := int64(n) * int64(n+1) / 2
	samples, ok := repetitions(o, 1, func(rep int) ([]float64, bool) {
		// Build the chain (not timed): inboxes[i] is the inbox of stage i+1;
		// stages 1..n-1 forward, stage n is the sink.
		inboxes := make([]chan int, n)
		for i := range inboxes {
			inboxes[i] = make(chan int, o.contender.mailboxCap)
		}
		for i := 0; i < n-1; i++ {
			go chainStage(inboxes[i], inboxes[i+1])
		}
		result := make(chan sinkResult)
		go chainSink(inboxes[n-1], n, result)

		// The source (this goroutine) puts 1..n into stage 1, one by one.
		t0 := time.Now()
		for v := 1; v <= n; v++ {
			inboxes[0] <- v
		}
		close(inboxes[0])
		r := <-result

		valid := r.count == n && r.sum == want
		if !valid {
			fmt.Fprintf(os.Stderr, "chain: sink received %d messages summing to %d (want %d and %d)\n",
				r.count, r.sum, n, want)
			return []float64{0}, false
		}
		return []float64{float64(r.last.Sub(t0).Nanoseconds()) / 1e6}, true
	})

	ps := params{{"length", n}, {"mode", o.mode}}
	notes := fmt.Sprintf("one goroutine per stage joined by %s, GOMAXPROCS=%d; --mode is ignored (goroutines are Go's only mode)",
		o.contender.chanDesc, runtime.GOMAXPROCS(0))
	emit(o, ps, "elapsed", "ms", samples[0], ok, notes)
	return ok
}
