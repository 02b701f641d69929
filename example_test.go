package ringtail_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/ringtail-ml/ringtail"
)

// A job's ranks are usually separate processes started by a launcher
// (ringtail run, torchrun, srun) and join with ConfigFromEnv. Here four
// ranks join inside one process with NewLocal and average a gradient:
// every rank ends with the same bits.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	comms, err := ringtail.NewLocal(ctx, 4, func(c *ringtail.Config) {
		c.Secret = []byte("example job secret") // every rank of a job shares it
		c.JobID = "example"
	})
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()

	grads := make([][]float32, len(comms))
	var wg sync.WaitGroup
	for r, comm := range comms {
		grads[r] = []float32{float32(r), 1, 2 * float32(r)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := comm.AllReduce(ctx, ringtail.Float32s(grads[r]), ringtail.Avg); err != nil {
				log.Fatal(err) // an *ringtail.Error naming the rank at fault
			}
		}()
	}
	wg.Wait()
	for r, g := range grads {
		fmt.Println("rank", r, g)
	}
	// Output:
	// rank 0 [1.5 1 3]
	// rank 1 [1.5 1 3]
	// rank 2 [1.5 1 3]
	// rank 3 [1.5 1 3]
}

// A straggler leaves the ring: rank 3 contributes its gradient at its own
// pace to its parent, rank 1, which folds it in before the members (0, 1
// and 2) reduce. This is STAR's parent tree; straggler/driver decides who
// is evicted and runs it every step.
func ExampleComm_AllReduceTree() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	comms, err := ringtail.NewLocal(ctx, 4, func(c *ringtail.Config) {
		c.Secret = []byte("example job secret")
		c.JobID = "example-tree"
	})
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()

	const tag = 7
	tree := ringtail.Tree{
		Members: []int{0, 1, 2},
		Edges:   []ringtail.TreeEdge{{Child: 3, Parent: 1, Must: true}},
		Tag:     tag, TagMask: ^uint32(0),
	}
	// The child posts and goes on computing; nothing waits for it but its
	// parent, and only because the edge says Must.
	if err := comms[3].Contribute(ctx, 1, ringtail.Float32s([]float32{30, 30}), tag); err != nil {
		log.Fatal(err)
	}
	sums := make([][]float32, 3)
	collected := make([]int, 3)
	var wg sync.WaitGroup
	for _, r := range tree.Members {
		sums[r] = []float32{float32(r), 1}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := comms[r].AllReduceTree(ctx, ringtail.Float32s(sums[r]), tree)
			if err != nil {
				log.Fatal(err)
			}
			collected[r] = n
		}()
	}
	wg.Wait()
	for _, r := range tree.Members {
		fmt.Println("member", r, sums[r], "collected", collected[r])
	}
	// Output:
	// member 0 [33 33] collected 0
	// member 1 [33 33] collected 1
	// member 2 [33 33] collected 0
}
